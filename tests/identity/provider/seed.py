"""Seed the provider: people of the directory and the relying party (Plangate's console).
Run as ``python -m tests.identity.provider.seed REDIRECT_URI CLIENT_ID CLIENT_SECRET``."""

import sys

import django


def main() -> None:
    redirect_uri, client_id, client_secret = sys.argv[1:4]
    django.setup()
    from django.contrib.auth.models import Group, User
    from oauth2_provider.models import Application

    admins, _ = Group.objects.get_or_create(name="plangate-admins")
    auditors, _ = Group.objects.get_or_create(name="plangate-auditors")
    dana = User.objects.create_user(
        "dana", "Dana@Acme.dev", "directory-pw", first_name="Dana", last_name="Scully"
    )
    dana.groups.add(admins)
    eve = User.objects.create_user(
        "eve", "eve@acme.dev", "directory-pw", first_name="Eve", last_name="unverified"
    )
    eve.groups.add(admins)
    User.objects.create_user("nadia", "nadia@acme.dev", "directory-pw", first_name="Nadia")
    audrey = User.objects.create_user("audrey", "audrey@acme.dev", "directory-pw")
    audrey.groups.add(auditors)
    Application.objects.create(
        name="Plangate",
        client_id=client_id,
        client_secret=client_secret,
        client_type=Application.CLIENT_CONFIDENTIAL,
        authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
        redirect_uris=redirect_uri,
        algorithm=Application.RS256_ALGORITHM,
        skip_authorization=False,
    )


if __name__ == "__main__":
    main()
