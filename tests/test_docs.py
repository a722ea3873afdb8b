"""The documentation shows only what exists: commands, options and links.

Every ```sh block of README.md and docs/ is read as shell: each mpibench invocation in it
(`mpibench CMD ...`, `python -m mpibench ...`, `launch/mpirun.sh ... -- ...`,
`launch/local.sh ...`, `sbatch ... sbatch/X.sbatch ...`, `make demo ARGS="..."`) has its
command and every option checked against the real parser (cli.build_parser), then the
whole line parsed by it (values, choices, required arguments); the launch scripts' own
options are checked against the scripts. Every relative link between README.md and
docs/ must reach a file, and its #anchor a heading of that file. Every command has a page.
"""
import os
import re
import shlex

from mpibench import cli, commands
from mpibench.errors import UsageError

from conftest import ROOT

DOCS = os.path.join(ROOT, "docs")
SCRIPT_OPTS = {  # launch scripts: their own options and how many values each takes
    "launch/mpirun.sh": None, "launch/local.sh": {"-n": 1, "--np": 1},
}
# Pages other than docs/commands/<name>.md for a command.
PAGE = {"verify": "docs/verify.md"}


def doc_files():
    out = [os.path.join(ROOT, "README.md")]
    for base, _, names in os.walk(DOCS):
        out += [os.path.join(base, n) for n in sorted(names) if n.endswith(".md")]
    return out


def rel(path):
    return os.path.relpath(path, ROOT)


def sh_blocks(text):
    """(first line number, source) of every ```sh fenced block."""
    out, lang, block, start = [], None, [], 0
    for number, line in enumerate(text.splitlines(), 1):
        fence = re.match(r"^\s*(?:```+|~~~+)\s*(\S*)", line)
        if fence and lang is None:
            lang, block, start = fence.group(1), [], number + 1
        elif fence:
            if lang in ("sh", "bash", "shell"):
                out.append((start, "\n".join(block)))
            lang = None
        elif lang is not None:
            block.append(line)
    return out


def shell_commands(source):
    """The simple commands of a shell snippet, as word lists (comments and continuations gone)."""
    out = []
    for line in source.replace("\\\n", " ").splitlines():
        lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|<>()")
        lexer.whitespace_split = True
        current = []
        for token in lexer:
            if set(token) <= set(";&|<>()"):
                out += [current] if current else []
                current = []
            else:
                current.append(token)
        out += [current] if current else []
    return out


def mpibench_args(words):
    """Every run of mpibench's own arguments in one command's words: [(label, args)]."""
    found, i = [], 0
    while i < len(words):
        w = words[i]
        start = (i + 1 if w == "mpibench" or w.endswith("/mpibench") else
                 i + 2 if w == "-m" and words[i + 1:i + 2] == ["mpibench"] else None)
        if start is not None:
            args = words[start:]
            if args[:1] == ["sweep"] and "--" in args:   # sweep's words end at --; the rest is its command
                end = args.index("--")
                found.append(("mpibench", args[:end]))
                i = start + end + 1
                continue
            return found + [("mpibench", args)]
        if w.endswith("launch/mpirun.sh") or w.endswith("launch/local.sh"):
            name = "launch/" + os.path.basename(w)
            args, own = script_split(name, words[i + 1:])
            return found + [(name, own), ("mpibench", args)]
        if w.endswith(".sbatch"):
            return found + [("mpibench", words[i + 1:])]
        if w.startswith("ARGS="):
            found.append(("mpibench", ["run"] + shlex.split(w[5:])))
        i += 1
    return found


def script_options(name):
    """A launch script's options and their value counts, read from its own case statement."""
    known = SCRIPT_OPTS[name]
    if known is not None:
        return known
    text = open(os.path.join(ROOT, name)).read()
    opts = {}
    for line in text.splitlines():
        m = re.match(r"\s*((?:--?[a-z-]+\|?)+)\)\s*(.*)", line)
        if not m:
            continue
        arity = 2 if "shift 3" in m.group(2) else 1 if "shift 2" in m.group(2) else 0
        for opt in m.group(1).split("|"):
            opts[opt] = arity
    SCRIPT_OPTS[name] = opts
    return opts


def script_split(name, words):
    """(mpibench's words, the script's own options) of a launch script's command line."""
    opts, own, i = script_options(name), [], 0
    while i < len(words):
        w = words[i]
        if w == "--":
            return words[i + 1:], own
        if w not in opts:
            break
        own.append(w)
        i += 1 + opts[w]
    return words[i:], own


def check_mpibench(args, parser, subparsers):
    """Problems with one mpibench argument list (empty: every word exists)."""
    if not args or args[0] in ("-h", "--help", "--version"):
        return []
    if args[0].startswith("-"):
        name = commands.DEFAULT
    else:
        name, args = args[0], args[1:]
        if name not in subparsers:
            return [f"no command '{name}'"]
    known = subparsers[name]._option_string_actions
    bad = []
    for w in args:
        if w == "--" or re.fullmatch(r"-\d.*", w):
            continue
        opt = w.split("=", 1)[0]
        if opt.startswith("--") or re.fullmatch(r"-[A-Za-z]", opt):
            if opt not in known:
                bad.append(f"'{name}' has no option {opt}")
    if not bad:     # the values too: types, choices, required arguments
        tail = ["--", "true"] if name == "sweep" and "--" not in args else []
        try:
            parser.parse_args([name, *args, *tail])
        except UsageError as exc:
            bad.append(str(exc))
    return bad


def invocations():
    """(file:line, label, args) of every mpibench or launch-script invocation in sh blocks."""
    out = []
    for path in doc_files():
        for start, source in sh_blocks(open(path).read()):
            for words in shell_commands(source):
                for label, args in mpibench_args(words):
                    out.append((f"{rel(path)}:{start}", label, args))
    return out


def subparser_map():
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    return parser, sub.choices


def test_every_shown_command_and_option_exists():
    parser, subparsers = subparser_map()
    found = invocations()
    assert len(found) > 40, f"only {len(found)} invocations found in the docs' sh blocks"
    problems = []
    for where, label, args in found:
        if label == "mpibench":
            problems += [f"{where}: {p}: {shlex.join(args)}" for p in
                         check_mpibench(args, parser, subparsers)]
        else:
            opts = script_options(label)
            problems += [f"{where}: {label} has no option {w}" for w in args if w not in opts]
    assert not problems, "\n".join(problems)


def test_option_check_can_fail():
    """The checker sees a wrong command and a wrong option (a test that cannot fail proves nothing)."""
    parser, subparsers = subparser_map()
    words = shell_commands("mpirun -np 2 python -m mpibench run --no-such-opt -b 1K\n"
                           "launch/mpirun.sh --host n1:2 --iface ib0 -- chek\n"
                           "mpibench sweep -q --bogus -- mpirun python -m mpibench info -Q\n"
                           "mpibench report --format html r.json  # a value the option refuses")
    found = [x for w in words for x in mpibench_args(w)]
    problems = [p for label, args in found if label == "mpibench"
                for p in check_mpibench(args, parser, subparsers)]
    assert problems[:4] == ["'run' has no option --no-such-opt", "no command 'chek'",
                            "'sweep' has no option --bogus", "'info' has no option -Q"]
    assert len(problems) == 5 and "--format" in problems[4] and "html" in problems[4]
    assert ("launch/mpirun.sh", ["--host", "--iface"]) in found


def test_every_command_has_a_page_that_names_its_options():
    parser, subparsers = subparser_map()
    problems = []
    for name in commands.NAMES:
        page = os.path.join(ROOT, PAGE.get(name, f"docs/commands/{name}.md"))
        if not os.path.exists(page):
            problems.append(f"{name}: no page {rel(page)}")
            continue
        if name in PAGE:        # a page of its own, kept by its own change: it must exist
            continue
        text = open(page).read()
        for action in subparsers[name]._actions:
            longs = [o for o in action.option_strings if o.startswith("--")] or action.option_strings
            if longs and "--help" not in longs \
                    and not any(re.search(re.escape(o) + r"(?![\w-])", text) for o in longs):
                problems.append(f"{name}: {rel(page)} never names {'/'.join(longs)}")
    assert not problems, "\n".join(problems)


# ---- links ----------------------------------------------------------------------------

LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def anchors(path):
    """GitHub's anchors of a Markdown file's headings (lower case, punctuation dropped)."""
    seen, out = {}, set()
    in_code = False
    for line in open(path).read().splitlines():
        if re.match(r"^\s*(```|~~~)", line):
            in_code = not in_code
            continue
        m = None if in_code else re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        text = re.sub(r"`|\*\*|__", "", m.group(1)).strip().lower()
        slug = re.sub(r"[^\w\- ]", "", text).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def links():
    """(file:line, source path, target) of every relative link outside code."""
    out = []
    for path in doc_files():
        in_code = False
        for number, line in enumerate(open(path).read().splitlines(), 1):
            if re.match(r"^\s*(```|~~~)", line):
                in_code = not in_code
                continue
            if in_code:
                continue
            for target in LINK.findall(re.sub(r"`[^`]*`", "", line)):
                if not re.match(r"^[a-z][a-z0-9+.-]*:", target):
                    out.append((f"{rel(path)}:{number}", path, target))
    return out


def link_problem(path, target):
    file, _, anchor = target.partition("#")
    dest = os.path.normpath(os.path.join(os.path.dirname(path), file)) if file else path
    if not os.path.exists(dest):
        return f"no file {rel(dest)}"
    if anchor:
        if not dest.endswith(".md"):
            return f"#{anchor} on a file that is not Markdown"
        if anchor not in anchors(dest):
            return f"no heading for #{anchor} in {rel(dest)}"
    return None


def test_every_link_between_the_docs_resolves():
    found = links()
    assert len(found) > 40, f"only {len(found)} relative links found"
    problems = [f"{where}: {target}: {p}" for where, path, target in found
                if (p := link_problem(path, target))]
    assert not problems, "\n".join(problems)


def test_link_check_can_fail(tmp_path):
    page = tmp_path / "a.md"
    page.write_text("# Reading `run`'s output\n## Per host, per rank\n")
    assert link_problem(str(page), "#reading-runs-output") is None
    assert link_problem(str(page), "#per-host-per-rank") is None
    assert link_problem(str(page), "#per-host") == f"no heading for #per-host in {rel(str(page))}"
    assert link_problem(str(page), "b.md").startswith("no file")


def test_readme_is_a_landing_page():
    lines = open(os.path.join(ROOT, "README.md")).read().splitlines()
    assert len(lines) <= 210, f"README.md has {len(lines)} lines; reference belongs in docs/"
    top = "\n".join(lines[:40]).lower()
    assert "gpu" in top and "not yet" in top, "README says near the top what has not run on a GPU"
