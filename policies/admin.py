"""Admin of what policies name and govern: agents and their API keys (an agent's page shows
its policy's active version) and roles and groups (their pages list the rules naming them).

The policy's own admin, which previews a new version against the team's plans and runs
the simulator, is in ``rehearsal.admin``: it judges plans, so it sits above ``plans``
(docs/decisions/0062).
"""

from . import admin_agents, admin_references  # noqa: F401 (register their admin)
