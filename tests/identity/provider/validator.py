from oauth2_provider.oauth2_validators import OAuth2Validator


class Validator(OAuth2Validator):
    """The claims a directory gives: e-mail (verified unless the user's last name says
    "unverified"), name, and the user's Django groups as ``groups``."""

    oidc_claim_scope = None  # every claim below goes in the ID token, whatever the scope

    def get_additional_claims(self, request):
        user = request.user
        return {
            "email": user.email,
            "email_verified": user.last_name != "unverified",
            "name": user.get_full_name() or user.username,
            "groups": sorted(group.name for group in user.groups.all()),
        }
