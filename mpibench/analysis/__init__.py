"""Stage 5, analysis: what saved results say beyond their rows.

scaling fits a model of time against ranks and size; heatmap draws host x host matrices.

May import: errors, launch, measure, results, diagnose.
"""
