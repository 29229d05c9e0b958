"""The reference study's quantitative claims, one row each, and which experiment answers each.

Why a table of functions: `rvguard experiment reproduce` must say, claim by
claim, what the study measured, what the simulator measures now and (where
it was run) what the real vLLM CPU engine measures, and whether the shape
holds — computed from the numbers (`rvguard.study.claim_answers`), not
written by hand, so a rerun that changes a number changes the verdict. A
claim's ``why`` says, in advance and in words, what the model has or lacks
that explains a difference; the table shows it beside the verdict.

Shape, not number: the simulator is a model of another machine. A claim is
"reproduced in shape" when the comparison the study draws (guard vs
baseline, before vs after a threshold, which way a trade goes) comes out
the same way; the numbers are printed side by side for the reader to judge.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from . import claim_answers as a
from .claim_answers import Answer, Docs

__all__ = ["CLAIMS", "Claim", "engine_note"]


@dataclass(frozen=True)
class Claim:
    """One quantitative claim of the study.

    Attributes:
        section: where in the study (its own ordering).
        text: the claim, short.
        study: the study's number(s), as it reports them.
        experiment: the experiment(s) that answer it (``rvguard experiment NAME``).
        answer: documents → (cell, shape holds).
        why: what explains a difference (shown when the shape or the magnitude differs).
        engine: also answer it from the engine's documents.
        fit: the model was calibrated to this number: a match is by construction, not a test, and
            the verdict says so.
    """

    section: str
    text: str
    study: str
    experiment: str
    answer: Callable[[Docs], Answer]
    why: str = ""
    engine: bool = False
    fit: bool = False


_LIVE = "the vLLM CPU engine column is the same experiment through the gateway (`--backend`), small reps"

CLAIMS: tuple[Claim, ...] = (
    Claim(
        "§2 marquee",
        "guarded assured miss at every β (40 runs, 0/2880, none rejected)",
        "0.0; none rejected",
        "beta-sweep",
        a.marquee_guard,
        engine=True,
        why="paced assured arrivals (B per window, the study's 'none rejected') — the Poisson variant is the "
        "next row",
    ),
    Claim(
        "§2 marquee",
        "Poisson assured arrivals at B/W instead (not in the study)",
        "—",
        "beta-sweep",
        a.poisson_variant,
        why="Poisson at exactly B/W overflows windows: the guard rejects that excess (AF allows it)",
    ),
    Claim(
        "§2 marquee",
        "unguarded assured miss across β ∈ {0, 0.5, 1, 2}",
        "0.86–0.94",
        "beta-sweep",
        a.unguarded_beta,
        engine=True,
        why="our LSQ learner is fitted on closed-loop latency (132 samples, R² ≈ 0.94) and so predicts "
        "queueing "
        "about right: at β ≥ 1 it sheds the flood before the FIFO wait reaches D. The study's stayed ≥ 0.86 "
        "at β = 2, which needs a predictor under-predicting queueing by > 2×; its fit's inputs are not "
        "stated "
        "and we did not tune ours to it",
    ),
    Claim(
        "§2 class-agnostic",
        "class-agnostic learner, β = 0: fails by overload",
        "admits 72/72, miss 0.94",
        "beta-sweep",
        a.agnostic(0.0),
        engine=True,
    ),
    Claim(
        "§2 class-agnostic",
        "class-agnostic learner, β = 1: fails by rejecting assured",
        "admits 29/72, unmet 0.94",
        "beta-sweep",
        a.agnostic(1.0),
        engine=True,
        why="same learner as above: calibrated at β = 1 it holds the load near D, so fewer assured are "
        "rejected "
        "and about a third of those admitted still meet D",
    ),
    Claim(
        "§2 class-agnostic",
        "guard with the class-agnostic learner",
        "0.0",
        "beta-sweep",
        a.agnostic_guard,
        engine=True,
    ),
    Claim(
        "§2 marquee",
        "worst assured completion; mean assured queue wait",
        "855 ms (≤ 924); ~130 ms",
        "beta-sweep",
        a.sojourn_and_wait,
        why="our flood service sits 10 % under the study's (μ_sat-calibrated), so the wait is shorter",
    ),
    Claim("§2 marquee", "paired opportunistic miss under the guard", "≈ 0.98", "beta-sweep", a.opp_paired),
    Claim(
        "§2 envelope",
        "max assured service over the marquee; s_max never exceeded",
        "601 ms; 660 ms ceiling",
        "beta-sweep",
        a.service_max,
    ),
    Claim(
        "§2 backlog",
        "assured backlog Q_A over the marquee runs (B = 6)",
        "≤ 3",
        "beta-sweep",
        a.backlog,
        why="paced arrivals spread each window's 6 over the second; with 4 slots a few wait, Q_A stays ≤ B",
    ),
    Claim(
        "§2 backlog",
        "Q_A at the floor = 4 = C corner cell",
        "1",
        "deadline-sweep",
        a.corner_backlog,
        why="the admitted flood keeps all C slots busy, so each paced assured arrival waits for one to free "
        "and a window's 4 can overlap; Q_A stays ≤ B as the precondition asks",
    ),
    Claim(
        "§2 FIFO",
        "same admission, FIFO dispatch, offered ρ̂ ≳ 1",
        "0.708 (priority 0.0)",
        "fifo-ablation",
        a.fifo,
        engine=True,
        why="FIFO's miss grows with how far past capacity the offer is; the study gives only 'ρ̂ ≳ 1'",
    ),
    Claim(
        "§2 capacity",
        "sustainable capacity μ_sat at C = 4, ~16 tokens",
        "9.6–9.7/s",
        "calibration",
        a.calibration("mu_sat", "rate"),
        fit=True,
    ),
    Claim(
        "§2 service",
        "batch-1 median service (the DR bound L)",
        "236 ms",
        "calibration",
        a.calibration("batch1_median_16"),
        fit=True,
    ),
    Claim(
        "§2 service",
        "service light → flood",
        "386 → 460 ms",
        "calibration",
        a.calibration_pair("light_mean_16", "flood_mean_16", " → "),
        why="the model is fitted to μ_sat, so its flood mean is C/μ_sat = 417 ms (Little's law at "
        "saturation); the study measured its 460 ms flood service and its 9.6/s in different runs, under "
        "different conditions, so the two need not agree, and the model cannot match both; its light-load "
        "coupling is weaker too",
    ),
    Claim(
        "§5 service",
        "batch-C service 183 + 14.9·ℓ ms (ℓ = 16, 48)",
        "421, 898 ms",
        "calibration",
        a.calibration_pair("batchC_mean_16", "batchC_mean_48", ", "),
        fit=True,
        why="the model is fitted to this line; the study's 421 and 898 ms are its 183 + 14.9·ℓ line "
        "evaluated at ℓ = 16 and 48, and ℓ = 48 lies outside the ~16-token requests the line was fitted on: "
        "an extrapolation on both sides, not a measurement",
    ),
    Claim(
        "§2 DR",
        "light-load services below L",
        "0.4 %",
        "calibration",
        a.calibration("below_lower_light", "%", study=0.004),
        why="L is the batch-1 median, so half of all solo runs fall below it; the model's light load (6/s "
        "Poisson) runs solo more often than the study's did",
    ),
    Claim(
        "§2 deadline axis",
        "deadline sweep at ρ_eff ≈ 0.45: holds to 600 ms, 0.003 at 500, 0.49 at 350",
        "0.0 ≥ 600 ms; 0.003; 0.49",
        "deadline-sweep",
        a.deadline_sweep,
        engine=True,
        why="unexplained: the model breaks one step earlier than the study (0.07 at 600 ms), though its "
        "assured wait for a slot is shorter than the study's (78 against 130 ms), so the wait for a slot "
        "held by a non-preemptible opportunistic request cannot be the reason; we have not found it",
    ),
    Claim(
        "§2 reservation axis",
        "floor sweep: absorbed at ρ_eff ≈ 1.04, floor = 8 (ρ_eff 1.19) misses 0.69",
        "1.04: 0.0; 1.19: 0.69",
        "floor-sweep",
        a.floor_sweep,
        why="the break sits at the same ρ_eff; in floors it is B ≈ 11: the study's floor-sweep service (≈ "
        "595 ms, "
        "6.7/s) contradicts its own μ_sat 9.6/s, and the model is calibrated to μ_sat",
    ),
    Claim(
        "§2 compound",
        "ρ > 1 and a tightening deadline compound",
        "floor 8: 0.70 → 0.99 (1200 → 400 ms)",
        "stress",
        a.compound,
    ),
    Claim(
        "§2 DR",
        "deferred drop near-inert: fires in 1 of 15 guard-DR cells; no false drop",
        "1/15",
        "stress",
        a.dr,
        why="two claims in one: 'no false drop' holds (no DR violation); 'near-inert' does not: DR fires "
        "whenever an assured request waits past D − L, and this grid's cells are deeper in overload (B up "
        "to 12 ≈ ρ_eff 1.25, D down to 400 ms) than the study's guard-DR cells, so it fires in most",
    ),
    Claim(
        "§2 trace replay",
        "BurstGPT replay, offered-basis unmet: guard vs admit-all",
        "≈ 0.33 vs ≈ 0.9",
        "trace-replay",
        a.replay,
        why="no BurstGPT slice ships; Mooncake (CV ≈ 2.9, batched timestamps) is the nearest in burstiness",
    ),
    Claim(
        "Table 1",
        "floor-entitled attainment: guard vs admit-all",
        "1.00 vs 0.08–0.13",
        "trace-replay",
        a.attainment,
    ),
    Claim(
        "Table 1",
        "phase sweep: marquee robust; low-floor replays origin-sensitive",
        "1.00; worst 0.67 / 0.73",
        "beta-sweep, trace-replay",
        a.phase,
    ),
    Claim(
        "§2 slices",
        "8 slices: guard unmet 0.05–0.35 over CV 0.85–2.75 (ρ 0.47, p 0.24); admit-all ≈ 0.9",
        "0.05–0.35; ρ 0.47, p 0.24",
        "slices",
        a.slices,
        why="slices come from two traces (Azure conversation, CV ≈ 1; Mooncake, CV ≈ 2.9), not one BurstGPT "
        "trace: the two groups separate cleanly, so the rank correlation comes out significant here",
    ),
    Claim(
        "§2 demote",
        "demote vs reject: ×2.5 unmet 0.35 → 0.05; ×1.5 floor met 0.77 (reject) vs 0.69 (demote)",
        "0.35 → 0.05; 0.77 vs 0.69",
        "demote-vs-reject",
        a.demote,
        why="the direction of both halves reproduces; the tight-deadline loss is small here because the "
        "model's "
        "48-token service tail is narrow (σ 0.08): the study's reject arm already missed 23 % at ×1.5",
    ),
    Claim(
        "§2 server priority",
        "vLLM server priority (admit-all): 0.0 at 1284 ms, 0.15/0.26/0.46 at 1100/1000/900",
        "0.0; 0.15 / 0.26 / 0.46 (guard 0.0)",
        "server-priority",
        a.server_priority,
        why="the model charges nothing for a long server-side waiting queue: with the same non-preemptive "
        "priority dispatch, server priority and the guard then behave alike; the study's admit-all server "
        "self-congested (its words), a mechanism the model lacks",
    ),
    Claim(
        "§2 rate limit",
        "static rate limit: per-class 0.0, flat crowds assured out",
        "0.0; 0.75",
        "rate-limit",
        a.rate_limit,
        why="the flat cap's loss is the flood's share of the offer (14/s of 20/s here)",
    ),
    Claim(
        "§2 token credits",
        "bimodal sizes: count meter SF miss; token meter 0.0 at offered unmet 0.38",
        "0.62 (V100) / 0.69 (sim); 0.0, 0.38",
        "token-credits",
        a.tokens,
        why="rvguard's token entitlement counts every arrival's weight in the window, so a small "
        "request after a shed large one is excess too; the study's GroupTB charged admitted cost only",
    ),
    Claim(
        "§4 GAIE",
        "mapping fault: the same assured requests 0.0 → 1.0; guard immune",
        "0.0 → 1.0",
        "gaie-fault",
        a.gaie,
    ),
    Claim(
        "§4 GAIE",
        "strict priority band contrast under a saturating burst",
        "high 0.31 vs low 0.92",
        "gaie-fault",
        a.bands,
    ),
    Claim(
        "§5 capacity",
        "batch cap cuts throughput 62 %: fixed floor late, lowered floor rejects",
        "unmet 0.975 all late vs 0.833 none late",
        "capacity-drop",
        a.capacity,
    ),
    Claim(
        "§3 screen",
        "p50 screen on the overload grid: precision / recall",
        "0.969 / 0.975",
        "screen-eval",
        a.screen_overload,
        why="on the model's grid (its own 40 configurations, deadlines = measured P95 × [0.5, 2], so half "
        "the cells hold) the p50 screen is conservative past saturation: no false accept, but it accepts "
        "only about 4 in 10 of the overload cells that meet D, where the study's accepted nearly all of its "
        "1320 V100 cells; why its overload prediction runs high here was not investigated",
    ),
    Claim(
        "§3 screen",
        "p99 screen: precision on the whole grid",
        "1.000",
        "screen-eval",
        a.screen("in-sample", "p99", "all", "precision", lambda v: v == 1.0),
    ),
    Claim(
        "§3 screen",
        "p99 screen: recall (over-flagging)",
        "0.814",
        "screen-eval",
        a.screen_overflag,
        why="only the direction is reproduced: the p99 screen accepts fewer cells than the p50 one, as the "
        "study's did; its recall here is about a fifth of the study's (it over-flags far more on the "
        "model's grid), so the number is not",
    ),
    Claim(
        "§3 screen",
        "p50 screen below saturation: precision",
        "0.83",
        "screen-eval",
        a.screen("in-sample", "p50", "below", "precision", lambda v: v < 0.95),
    ),
    Claim(
        "§3 screen",
        "p99 held out (service from one rep): precision",
        "1.000 → 0.90",
        "screen-eval",
        a.screen_held_out,
        why="the model's service dispersion is the same in every rep, so one rep's p99 calibrates the "
        "others; the study's held-out drop comes from rep-to-rep variation a seeded model does not have",
    ),
    Claim(
        "§2 second GPU",
        "2×RTX 6000 Ada: floor 0.0 to 350 ms; floor 22/26 miss 0.52/0.78",
        "0.0; 0.52 / 0.78",
        "—",
        a.not_run,
        why="no Ada profile: the study gives one service figure (214 ms) for that node",
    ),
)


def engine_note(claims: Sequence[Claim]) -> str:
    """What the engine column is."""
    return _LIVE if any(c.engine for c in claims) else ""
