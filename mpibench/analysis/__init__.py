"""Stage 5, analysis: what saved results say beyond their rows (scaling models, pictures).

May import: errors, launch, measure, results, diagnose.
"""
