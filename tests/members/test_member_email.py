"""E-mails are stored lowercased and matched in any case: one rule, email_normalize and
Member.objects.for_email, used by the services, the admin and plan issuance."""

from __future__ import annotations

import sys
import unicodedata

from members.models import Member, email_case_lookalike, email_normalize
from members.services import member_disable, member_upsert


def test_email_normalize_trims_and_lowercases():
    assert email_normalize("  Bob@Acme.DEV \n") == "bob@acme.dev"


def test_for_email_finds_the_team_s_member_in_any_case(member, outsider, team, other_team):
    assert Member.objects.for_email(team, member.email.upper()).get() == member
    assert Member.objects.for_email(team.pk, f" {member.email} ").get() == member
    assert not Member.objects.for_email(other_team, member.email).exists()
    assert Member.objects.for_email(other_team, outsider.email.title()).get() == outsider


def test_upsert_stores_lowercased_and_updates_in_any_case(team):
    created = member_upsert(team=team, email=" Carol@Acme.DEV", name="Carol")
    updated = member_upsert(team=team, email="CAROL@acme.dev", name="Carol C")

    assert created.pk == updated.pk
    assert Member.objects.get(pk=created.pk).email == "carol@acme.dev"
    assert Member.objects.get(pk=created.pk).name == "Carol C"
    assert Member.objects.filter(team=team).count() == 1


def test_disable_matches_in_any_case(member, team):
    member_disable(team=team, email=member.email.upper())
    member.refresh_from_db()
    assert member.is_active is False


def test_the_characters_that_lowercase_into_another_letter_are_exactly_these():
    found = {
        f"U+{code:04X} {unicodedata.name(chr(code))}"
        for code in range(sys.maxunicode + 1)
        if email_case_lookalike(chr(code)) is not None
    }

    # Every code point, walked: KELVIN SIGN lowercases into an ASCII letter (k), U+0130
    # into i and a combining dot, the others into å, ß, ω and θ.
    assert found == {
        "U+0130 LATIN CAPITAL LETTER I WITH DOT ABOVE",
        "U+03F4 GREEK CAPITAL THETA SYMBOL",
        "U+1E9E LATIN CAPITAL LETTER SHARP S",
        "U+2126 OHM SIGN",
        "U+212A KELVIN SIGN",
        "U+212B ANGSTROM SIGN",
    }
    # A letter's own capital never is one, nor is a member's address written in capitals.
    assert email_case_lookalike("KIM@ACME.DEV") is None
    assert email_case_lookalike("J\u00d6RG@B\u00dcCHER.DE") is None
    assert email_case_lookalike("\u212aim@acme.dev") == "\u212a"
