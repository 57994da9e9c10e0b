"""The guard in the agent frameworks' own types, one module per framework (each needs its
extra): `guard.adapters.openai_agents` (``guard[openai-agents]``), `guard.adapters.pydantic_ai`
(``guard[pydantic-ai]``) and `guard.adapters.langgraph` (``guard[langgraph]``)."""
