"""What each obligation assumes, in words, and who watches it at run time.

A verdict of `rvguard verify` is a proof *from* assumptions; each obligation
names its own (text output and ``--json``'s ``assumptions``). The
assumptions the run time can break are enforced or watched:

* the dispatch rule (A2) is the decision core's own (`rvguard.enforce.core`);
* the envelope (A3, service ≤ its ceiling; DR's L ≤ the true service) is
  reported by the service-floor watch and the monitors' envelope check;
* token credits: every request is charged at least ``min_prompt_tokens``
  prompt and ``min_output_tokens`` output tokens — the core counts a
  missing prompt size as that minimum (`rvguard.contract.MIN_PROMPT_TOKENS`);
* one credit counter per tenant and window: a fleet's shared store must not
  evict a live window's counter (a lost counter re-grants the floor).
"""

from __future__ import annotations

from ..contract import Contract, CreditMode
from .encoding import VerifyOptions

__all__ = ["BACKLOG", "assumptions_of", "short"]

SCHEDULER = (
    "A2 dispatch: rvguard's DecisionCore: C slots, non-preemptive, work-conserving, ranked by tier, "
    "floor before surplus, then arrival (demoted excess below every floor; surplus in at most "
    "C − reserve slots)"
)
ENVELOPE = (
    "A3 envelope: every floor request's service ≤ its tenant's ceiling and every other ≤ s_max_opp "
    "(the guard's watch reports a service above)"
)
ADMISSION = (
    "A1 credits: one credit counter per tenant and window, for the whole guard (a fleet's store never evicts "
    "a live window's counter), and the tenant is the authenticated one"
)
INDUCTION = (
    "induction: every floored tenant at this tier or above meets its own deadline obligation (the induction)"
)
BACKLOG = (
    "backlog: at most one window's floor of each tenant is in the system when a "
    "request arrives; refuted by proofs/backlog_lemma.py"
)
DR = "DR: L(R) ≤ the true service of every request (the monitors check observed services against L)"
CAP = "cap: the guard caps every request's output at output_cap"


def _tokens(contract: Contract, options: VerifyOptions) -> list[str]:
    if contract.credit is not CreditMode.TOKENS:
        return []
    return [
        f"w_min: every request is charged at least {options.min_prompt_tokens} prompt and "
        f"{min(options.min_output_tokens, contract.output_cap)} output tokens (the core counts a "
        "missing prompt size as the minimum)"
    ]


def short(assumption: str) -> str:
    """An assumption's key, the words before its colon (``A2 dispatch``, ``w_min``)."""
    return assumption.split(":", 1)[0]


def assumptions_of(name: str, contract: Contract, options: VerifyOptions) -> list[str]:
    """The assumptions the obligation ``name`` (``stability``, ``deadline[t]``, …) is proven from."""
    kind = name.split("[", 1)[0]
    tokens = _tokens(contract, options)
    if kind == "deadline":
        backlog = [BACKLOG] if options.backlog_assumption else [INDUCTION]
        return [SCHEDULER, ENVELOPE, ADMISSION, *tokens, CAP, *backlog]
    if kind == "stability":
        return [ENVELOPE, ADMISSION, *tokens]
    if kind == "credit_bound":
        return tokens
    if kind == "service_envelope":
        return [CAP]
    if kind == "dr_soundness":
        return [DR, CAP]
    return []
