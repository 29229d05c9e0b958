"""Evidence against the reference study: experiments on a real engine, and the claim-by-claim table.

This part sits above the simulator (`rvguard.sim`), the screen and the
gateway, and may import all three: `live` drives an experiment's arms
through the real gateway against an engine (``rvguard experiment NAME
--backend URL``); `claims`, `claim_answers` and `reproduce` turn every
experiment's documents into ``reproduction.md`` (``rvguard reproduce``).
"""
