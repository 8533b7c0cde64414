"""Design reviews: a scenario's options side by side over several seeds, and one report to attach.

    from kip_lab.review import compare
    review = compare("rolling_bounce", {"lab.coordinator.assignment_interval_ms": [0, 1000]}, seeds=5, out="review/")
    review.table(); review.verdicts          # review/report.html: one self-contained page

``kip-lab compare SCENARIO --vary KEY=V1,V2 --seeds N --out DIR`` is the same from the command
line. Needs the ``viz`` extra (pandas, Altair, vl-convert) for the report.
"""

from kip_lab.review.compare import OUTCOMES, Outcome, Review, ReviewError, Variant, compare, outcome_value

__all__ = ["OUTCOMES", "Outcome", "Review", "ReviewError", "Variant", "compare", "outcome_value"]
