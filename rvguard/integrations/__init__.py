"""Integrations with serving stacks that operators already run (each an optional extra).

`rvguard.integrations.litellm_hook` puts the floor in front of a LiteLLM proxy's deployments.
"""
