"""How text output writes a figure: fixed decimals, times in ms or us, shares in percent;
an unknown figure (None) as n/a."""


def ms(seconds):
    """Milliseconds, one decimal."""
    return "n/a" if seconds is None else f"{seconds * 1e3:.1f}"


def pct(share):
    """A share (0.123) as a percent with one decimal (12.3%)."""
    return "n/a" if share is None else f"{share * 100:.1f}%"
