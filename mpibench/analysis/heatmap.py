"""A host x host matrix drawn as a heatmap PNG (matplotlib, optional)."""
from importlib.util import find_spec
from typing import TYPE_CHECKING, Optional, Sequence

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

Matrix = Sequence[Sequence[Optional[float]]]    # [from][to]; None: not measured


def unavailable() -> Optional[str]:
    """Why no heatmap can be drawn here (None when matplotlib is installed)."""
    return None if find_spec("matplotlib") else \
        "--png needs matplotlib, which is not installed (pip install matplotlib)"


def draw_on(fig: "Figure", ax: "Axes", labels: Sequence[str], matrix: Matrix, title: str,
            unit: str = "GB/s", cmap: str = "viridis") -> None:
    """The heatmap on one axes of a figure; cmap 'viridis_r' makes small values (latency) bright."""
    values = [[float("nan") if v is None else v for v in row] for row in matrix]
    top = max((v for row in matrix for v in row if v is not None), default=1.0)
    n = len(labels)
    image = ax.imshow(values, cmap=cmap, vmin=0, vmax=top)
    ax.set_xticks(range(n), labels, rotation=45, ha="right")
    ax.set_yticks(range(n), labels)
    ax.set(xlabel="to", ylabel="from", title=title)
    for i, row in enumerate(matrix):
        for j, v in enumerate(row):
            if v is not None and n <= 24:
                shade = v / top if top else 0.0
                bright = (1 - shade if cmap.endswith("_r") else shade) > 0.6
                ax.text(j, i, f"{v:.3g}", ha="center", va="center",
                        color="black" if bright else "white", fontsize=9)
    fig.colorbar(image, ax=ax, label=unit)


def save(fig: "Figure", path: str) -> None:
    """Write the figure to path (already reserved) through a temporary file."""
    import matplotlib.pyplot as plt
    from ..results.files import replace_atomically
    try:
        replace_atomically(path, lambda tmp: fig.savefig(tmp, format="png", dpi=100))
    finally:
        plt.close(fig)


def draw(path: str, labels: Sequence[str], matrix: Matrix, title: str, unit: str = "GB/s") -> None:
    """One heatmap in its own picture at path."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    side = max(4.0, 0.7 * len(labels) + 2.5)
    fig, ax = plt.subplots(figsize=(side + 1.2, side))
    draw_on(fig, ax, labels, matrix, title, unit)
    fig.tight_layout()
    save(fig, path)
