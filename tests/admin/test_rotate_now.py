""" "Rotate now" while the next key is too young to sign: the control is disabled with the
time it becomes possible, and the page names the emergency path, revoking the active key."""

from __future__ import annotations

import re
from datetime import timedelta

from django.contrib.admin.utils import quote
from django.urls import reverse
from django.utils import timezone

from plans.keys import publication_delay, signing_keys_bootstrap
from plans.models import SigningKey

State = SigningKey.State


def fresh_keys() -> SigningKey:
    """A fresh install's keys: the next key was published a minute ago."""
    signing_keys_bootstrap()
    published = timezone.now() - timedelta(minutes=1)
    SigningKey.objects.update(created_at=published)
    return SigningKey.objects.get(state=State.NEXT)


def test_the_list_shows_rotate_now_disabled_with_the_time_it_becomes_possible(superuser_client, db):
    next_key = fresh_keys()
    page = superuser_client.get(reverse("admin:plans_signingkey_changelist")).content.decode()
    possible_at = timezone.localtime(next_key.created_at + publication_delay())
    disabled = re.search(r'<span[^>]*id="rotate-now-disabled"[^>]*>([^<]*)</span>', page)
    assert disabled is not None
    assert possible_at.strftime("%H:%M") in disabled.group(1)
    assert f'href="{reverse("admin:plans_signingkey_rotate")}"' not in page


def test_the_rotate_page_disables_its_button_and_names_revoke(superuser_client, db):
    next_key = fresh_keys()
    active = SigningKey.objects.get(state=State.ACTIVE)
    page = superuser_client.get(reverse("admin:plans_signingkey_rotate")).content.decode()
    possible_at = timezone.localtime(next_key.created_at + publication_delay())
    assert re.search(r'<input type="submit" value="Yes, rotate now" disabled>', page)
    assert possible_at.strftime("%Y-%m-%d %H:%M:%S") in page
    assert "revoke the active key" in page
    active_url = reverse("admin:plans_signingkey_change", args=[quote(active.kid)])
    assert f'href="{active_url}"' in page
    assert superuser_client.get(active_url).status_code == 200


def test_once_the_next_key_is_old_enough_rotate_now_is_offered(superuser_client, db):
    signing_keys_bootstrap()
    SigningKey.objects.update(
        created_at=timezone.now() - publication_delay() - timedelta(seconds=1)
    )
    page = superuser_client.get(reverse("admin:plans_signingkey_changelist")).content.decode()
    assert f'href="{reverse("admin:plans_signingkey_rotate")}"' in page
    assert "rotate-now-disabled" not in page
    rotate = superuser_client.get(reverse("admin:plans_signingkey_rotate")).content.decode()
    assert re.search(r'<input type="submit" value="Yes, rotate now">', rotate)
    assert "rotate-too-young" not in rotate
