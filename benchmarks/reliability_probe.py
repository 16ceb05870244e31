"""Bad inputs, injected faults and spoiler listings, run through the real CLI, written up as
docs/reliability.md.

    PYTHONPATH=. python benchmarks/reliability_probe.py --out docs/reliability.md

Why: the one-line errors and repairs of issues 33 and 34 are each tested on their own; this runs
them side by side, as a user would meet them, so the table shows what every one of them prints
today, and what each listing at a spoiler limit shows of later chapters.
Every command is a subprocess ``python -m litrag.cli ...`` with a temporary ``LITRAG_HOME`` that
is a copy of one small library (The Call of the Wild, its first two chapters, offline
segmenter, packaged MiniLM, embedded Qdrant Edge). For each: the command, its exit code, what
it said (its ``error:`` line, else its first line), and whether the library was intact
afterwards: unchanged on disk for a refused input, ``litrag verify`` passing after a repair.
Takes a few minutes on 2 cores (each command loads Python; those that open the library load the
embedder).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BOOK = Path(os.environ.get("LITRAG_DATA") or ROOT / "data")
BOOK = BOOK / "books" / "pg215_call_of_the_wild.txt"
FOOTER = "\n*** END OF THE PROJECT GUTENBERG EBOOK ***\n"
QUESTION = "Who sold Buck?"
FATHER = "His father, Elmo, a huge St. Bernard"
# A window-title OSC ended by BEL, a CSI colour, a screen clear, a lone bell: in chapter I
ESCAPES = "\x1b]0;owned\x07\x1b[31m\x1b[2J\x07"
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
LATER_TITLE = "The Law of Club and Fang"  # chapter II's title
# A ``litrag remove`` SIGKILLed after the blocks' collection was cleared and before the
# children's was: the fault is exact, not a race against a timer.
KILLED_REMOVE = """
import os, signal, sys
from litrag.stores.edge_store import QdrantEdgeVectorStore
real = QdrantEdgeVectorStore.delete_nodes
def delete_nodes(self, *a, **k):
    if self.collection_name.endswith("-children"):
        os.kill(os.getpid(), signal.SIGKILL)
    return real(self, *a, **k)
QdrantEdgeVectorStore.delete_nodes = delete_nodes
from litrag.cli import main
sys.exit(main(sys.argv[1:]))
"""


@dataclass
class Row:
    """One line of the table."""

    what: str
    command: str
    code: int
    said: str
    intact: str


class Probe:
    """The temporary world the commands run in: the small book, the clean library, and a fresh
    copy of it per case."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.rows: list[Row] = []
        self.spoilers: list[Row] = []  # listings at a spoiler limit: what of later chapters shows
        self.book = tmp / "books" / "215-0.txt"
        self.book.parent.mkdir(parents=True)
        raw = BOOK.read_bytes().decode("utf-8-sig").replace("\r\n", "\n")
        raw = raw.replace(FATHER, FATHER.replace("Elmo,", f"{ESCAPES}Elmo,"), 1)  # for issue 34
        self.book.write_text(raw[: raw.index("\nChapter III.")] + FOOTER, encoding="utf-8")
        self.clean = tmp / "clean"
        code, _, err = self.cli(self.clean, "ingest", "-q", str(self.book))
        if code != 0:
            raise SystemExit(f"the clean library did not ingest: {err}")
        self.n = 0

    def home(self) -> Path:
        """A fresh copy of the clean library."""
        self.n += 1
        dest = self.tmp / f"case{self.n}"
        shutil.copytree(self.clean, dest)
        return dest

    def cli(
        self,
        home: Path,
        *args: str,
        env: dict[str, str] | None = None,
        code: str | None = None,
    ) -> tuple[int, str, str]:
        """One command in a subprocess; ``code``: a Python program run instead of the plain
        CLI (for an injected kill), given ``args``."""
        base = {k: v for k, v in os.environ.items() if not k.startswith("LITRAG_")}
        base.update(LITRAG_HOME=str(home), PYTHONPATH=str(ROOT), **(env or {}))
        head = [sys.executable, "-c", code] if code else [sys.executable, "-m", "litrag.cli"]
        proc = subprocess.run(
            [*head, *args], env=base, capture_output=True, text=True, timeout=600, cwd=self.tmp
        )
        return proc.returncode, proc.stdout, proc.stderr

    def shown(self, text: str) -> str:
        """A line or command for the table: temp paths as $TMP, control characters escaped,
        pipes escaped for markdown."""
        from litrag.cli.common import printable

        text = text.replace(str(self.tmp), "$TMP")  # then a path the message itself cut short:
        text = re.sub(re.escape(tempfile.gettempdir()) + r"/litrag-probe-[^\s)]*", "$TMP...", text)
        return printable(text).replace("|", "\\|")

    def said(self, out: str, err: str) -> str:
        """Its ``error:`` line, else its first ``warning:`` or ``refused:`` line, else its
        first line (stdout's, else stderr's)."""
        # the probe's own book carries terminal escapes (for one row): not each row's point
        said = [ln.strip() for ln in err.splitlines() if "control character(s)" not in ln]
        lines = [ln for ln in said if ln.startswith("error: ")]
        lines += [ln for ln in said if ln.startswith("litrag ") and ": error: " in ln]  # argparse
        lines += [ln for ln in said if ln.startswith(("warning: ", "refused: "))]
        lines += out.strip().splitlines() or err.strip().splitlines() or [""]
        return lines[0]

    def intact(self, home: Path, before: dict[str, str]) -> str:
        """Byte for byte as before, else what ``litrag verify`` says of it."""
        if snapshot(home) == before:
            return "yes (unchanged on disk)"
        return f"{self.verified(home, 1)}; files rewritten"

    def verified(self, home: Path, expect_books: int | None = None) -> str:
        """``litrag verify`` on ``home``: its ``ok:`` line, or what it found."""
        code, out, _ = self.cli(home, "verify")
        last = out.strip().splitlines()[-1] if out.strip() else ""
        if code == 0 and (expect_books is None or last.startswith(f"ok: {expect_books} book")):
            return f"yes (verify: {last})"
        return f"NO (verify exit {code}: {last})"

    def refused(
        self,
        what: str,
        args: list[str],
        env: dict[str, str] | None = None,
        home: Path | None = None,
        prepare: Callable[[Path], None] | None = None,
        pick: str | None = None,
        shown: list[str] | None = None,
        timed: bool = False,
    ) -> tuple[int, str, str]:
        """A bad input: the library must be byte for byte as it was. ``shown``: the arguments
        as the table spells them, where ``args`` are too long to print; ``timed``: the
        command's seconds go in the first column."""
        home = home or self.home()
        if prepare is not None:
            prepare(home)
        before = snapshot(home)
        t0 = time.perf_counter()
        code, out, err = self.cli(home, *args, env=env)
        took = time.perf_counter() - t0
        intact = self.intact(home, before)
        said = self.said(out, err)
        if pick is not None:  # the line that shows the point, where it is not the first
            said = next((ln for ln in (out + err).splitlines() if pick in ln), said)
        self.add(what, shown or args, env, code, said, intact, took if timed else None)
        return code, out, err

    def add(
        self,
        what: str,
        args: list[str],
        env: dict[str, str] | None,
        code: int,
        said: str,
        intact: str,
        took: float | None = None,
    ) -> None:
        prefix = " ".join(f"{k}={shlex.quote(v)}" for k, v in (env or {}).items())
        command = f"{prefix + ' ' if prefix else ''}litrag {shlex.join(args)}"
        if took is not None:
            what = f"{what} (took {took:.1f} s)"
        self.rows.append(Row(what, self.shown(command), code, self.shown(said), intact))
        print(f"{code:>4}  {what}: {self.shown(said)[:90]}", file=sys.stderr, flush=True)


def snapshot(folder: Path) -> dict[str, str]:
    """Every file's bytes (as a hash): the store engine rewrites some files, unchanged, each
    time it opens a shard, so times are not compared."""
    if not folder.exists():
        return {}
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.name != "owner.json"  # who last opened it, not library data
    }


def encrypted_zip(text: Path, dest: Path) -> Path:
    """Info-ZIP's ``zip -P`` where installed, else the members flagged encrypted."""
    tool = shutil.which("zip")
    if tool:
        subprocess.run([tool, "-q", "-j", "-P", "secret", str(dest), str(text)], check=True)
        return dest
    with zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.write(text, text.name)
    data = bytearray(dest.read_bytes())
    for sig, at in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):
        data[data.find(sig) + at] |= 0x1
    dest.write_bytes(bytes(data))
    return dest


def corrupt_zip(text: Path, dest: Path) -> Path:
    """A sound central directory over a deflate stream garbled midway."""
    with zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.write(text, text.name)
    data = bytearray(dest.read_bytes())
    start = 30 + len(text.name) + 200
    for i in range(start, start + 60):
        data[i] ^= 0xFF
    dest.write_bytes(bytes(data))
    return dest


def truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def run_cases(p: Probe) -> None:
    tmp, book = p.tmp, p.book
    ask = ["ask", QUESTION, "--no-llm"]
    # -- settings
    p.refused("unknown LITRAG_ setting (a typo)", ask, {"LITRAG_LLM_TIMEOUTS": "5"})
    p.refused("a boolean setting that is neither", ["books"], {"LITRAG_CHILDREN": "maybe"})
    p.refused("temperature inf", ["books"], {"LITRAG_LLM_TEMPERATURE": "inf"})
    p.refused("timeout nan", ["books"], {"LITRAG_LLM_TIMEOUT": "nan"})
    timeout = ["assets", "pg215", "--timeout", "inf"]
    p.refused("--timeout inf (a command outside the settings)", timeout)
    nope = Path("/proc/nope")
    code, out, err = p.cli(nope, "ingest", "-q", str(book))
    gone = "yes (nothing created there)" if not nope.exists() else "NO (it was created)"
    p.add("LITRAG_HOME under /proc", ["ingest", "-q", str(book)], {"LITRAG_HOME": str(nope)},
          code, p.said(out, err), gone)  # fmt: skip
    # -- inputs
    folder = tmp / "a-folder"
    folder.mkdir()
    p.refused("--catalog is a folder", ["ingest", "--catalog", str(folder), str(book)])
    p.refused('--catalog ""', ["ingest", "--catalog", "", str(book)])
    p.refused("--port 70000", ["chat", "--port", "70000", "--no-llm"])
    enc = encrypted_zip(book, tmp / "books" / "enc.zip")
    p.refused("an encrypted zip", ["ingest", "-q", str(enc)])
    bad = corrupt_zip(book, tmp / "books" / "bad.zip")
    p.refused("a zip with a corrupt deflate stream", ["ingest", "-q", str(bad)])
    small = ["ingest", "--dry-run", "--max-mb", "0.001", str(book)]
    p.refused("dry run with --max-mb below the book", small)
    evil = tmp / "books" / "book\ningested 9, unchanged 0, failed 0.txt"
    shutil.copy(book, evil)
    p.refused(
        "a newline in a file name (dry run)", ["ingest", "--dry-run", str(evil)], pick="book\\n"
    )
    catalog = tmp / "pg_catalog.csv"
    catalog.write_text(
        "Text#,Type,Issued,Title,Language,Authors,Subjects,LoCC,Bookshelves\n"
        'x84,Text,1993-10-01,Frankenstein,en,"Shelley, Mary",,PR,\n'
        '215,Text,1995-03-01,The Call of the Wild,en,"London, Jack, 1876-1916",,PS,\n',
        encoding="utf-8",
    )
    rows = ["ingest", "--dry-run", "--catalog", str(catalog), str(book)]
    p.refused("a catalog with one bad row (dry run)", rows)
    two = tmp / "books" / "two-books.txt"
    second = "*** START OF THE PROJECT GUTENBERG EBOOK ANOTHER ***\nAn entirely other tale.\n"
    two.write_text(book.read_text(encoding="utf-8") + "\n" + second + FOOTER, encoding="utf-8")
    home = p.home()
    code, out, err = p.cli(home, "ingest", "-q", str(two))
    p.add("a second START/END block in one file", ["ingest", "-q", str(two)], None, code,
          p.said(out, err), p.verified(home, 1))  # fmt: skip
    # -- faults on disk, then the repair
    home = p.home()
    truncate(home / "books.json")
    code, out, err = p.cli(home, "books")
    p.add("truncated registry (books.json cut in half)", ["books"], None, code, p.said(out, err),
          "(damaged: repaired below)")  # fmt: skip
    code, out, err = p.cli(home, "verify", "--repair")
    p.add("  ... then the repair", ["verify", "--repair"], None, code, p.said(out, err),
          p.verified(home, 1))  # fmt: skip
    home = p.home()
    shard = home / "index" / "litrag" / "shard"
    biggest = max((f for f in shard.rglob("*") if f.is_file()), key=lambda f: f.stat().st_size)
    truncate(biggest)  # the write-ahead log, in a fresh library: the engine replays what it can
    code, out, err = p.cli(home, *ask)
    p.add(f"truncated shard file ({biggest.relative_to(home)}, the largest)", ask, None, code,
          p.said(out, err), p.verified(home, 1))  # fmt: skip
    home = p.home()
    (segment,) = (home / "index" / "litrag" / "shard").glob("segments/*/segment.json")
    truncate(segment)
    code, out, err = p.cli(home, *ask)
    p.add("truncated shard file (segments/*/segment.json)", ask, None, code,
          p.said(out, err), "(damaged: repaired below)")  # fmt: skip
    code, out, err = p.cli(home, "verify", "--repair")
    p.add("  ... then the repair", ["verify", "--repair"], None, code, p.said(out, err),
          p.verified(home, 1))  # fmt: skip
    home = p.home()
    (segment,) = (home / "index" / "litrag-children" / "shard").glob("segments/*/segment.json")
    truncate(segment)
    for what, args in (("truncated shard file of the paragraph children (segment.json)", ask),
                       ("  ... then verify", ["verify"])):  # fmt: skip
        code, out, err = p.cli(home, *args)
        p.add(what, args, None, code, p.said(out, err), "(damaged: repaired below)")
    code, out, err = p.cli(home, "verify", "--repair")
    p.add("  ... then the repair", ["verify", "--repair"], None, code, p.said(out, err),
          p.verified(home, 1))  # fmt: skip
    home = p.home()
    code, out, err = p.cli(home, "remove", "pg215", code=KILLED_REMOVE)
    said = p.said(out, err) or "(killed: nothing printed)"
    what = "`litrag remove` SIGKILLed between the two collections"
    p.add(what, ["remove", "pg215"], None, code, said, "(half removed: see below)")
    code, out, err = p.cli(home, "verify")
    p.add("  ... then verify", ["verify"], None, code, p.said(out, err), "(reported)")
    code, out, err = p.cli(home, "verify", "--repair")
    left = json.loads((home / "books.json").read_text(encoding="utf-8"))
    gone = "pg215" not in left and not (home / "removing.json").exists()
    state = p.verified(home, 0) if gone else f"NO (the registry lists {sorted(left)})"
    p.add("  ... then the repair", ["verify", "--repair"], None, code, p.said(out, err), state)


def hostile_mirror(tmp: Path, book: Path) -> tuple[Path, dict[str, Path]]:
    """A mirror folder with one real book beside a ``.txt`` link to /dev/zero, a FIFO, a
    dangling link and a link out of the folder to /etc/passwd (issue 34, bug 3)."""
    mirror = tmp / "mirror"
    (mirror / "2" / "1" / "215").mkdir(parents=True)
    shutil.copy(book, mirror / "2" / "1" / "215" / "215-0.txt")
    named = {
        "zero": mirror / "999-0.txt",
        "fifo": mirror / "fifo.txt",
        "dangling": mirror / "gone.txt",
        "out": mirror / "passwd.txt",
    }
    named["zero"].symlink_to("/dev/zero")
    os.mkfifo(named["fifo"])
    named["dangling"].symlink_to(mirror / "no-such-book.txt")
    named["out"].symlink_to("/etc/passwd")
    return mirror, named


def run_untrusted_cases(p: Probe) -> None:
    """Issue 34: arguments of every command, book text that drives the terminal, a hostile
    mirror, a stalled LLM server, a book's source replaced or deleted."""
    tmp, book = p.tmp, p.book
    # -- the request model `litrag ask` shares with the UI's /answer
    long = ["ask", "x" * 100_000, "--no-llm"]
    p.refused("a 100,000-character question", long, shown=["ask", "<100,000 x>", "--no-llm"])
    p.refused("--top-k -3", ["ask", QUESTION, "--no-llm", "--top-k", "-3"])
    p.refused("--upto-chapter 0", ["ask", QUESTION, "--no-llm", "--upto-chapter", "0"])
    p.refused("--upto-chapter past the book", ["ask", QUESTION, "--no-llm", "--upto-chapter", "9"])
    # -- terminal escape sequences in chapter I's text
    home = p.home()
    before = snapshot(home)
    args = ["ask", "What kind of dog was Buck's father?", "--no-llm", "--full"]
    code, out, err = p.cli(home, *args)
    shown = FATHER in out
    raw = len(CONTROL.findall(out + err))
    said = f"(the passage, {'with' if shown else 'WITHOUT'} {FATHER!r}; {raw} control characters)"
    intact = p.intact(home, before) if raw == 0 and shown else "NO (printed raw)"
    p.add("escape sequences (OSC, CSI, BEL) in chapter I's text", args, None, code, said, intact)
    # -- a mirror nobody checked
    mirror, named = hostile_mirror(tmp, book)
    home = p.home()
    before = snapshot(home)
    args = ["ingest", "--dry-run", str(mirror)]
    t0 = time.perf_counter()
    code, out, err = p.cli(home, *args)
    took = time.perf_counter() - t0
    intact = p.intact(home, before)
    lines = (out + err).splitlines()
    for key, what in (
        ("zero", "a mirror `.txt` linked to /dev/zero"),
        ("fifo", "a FIFO named `.txt` in a mirror"),
        ("dangling", "a dangling link in a mirror"),
        ("out", "a mirror link out of the folder (to /etc/passwd)"),
    ):
        said = next((ln.strip() for ln in lines if str(named[key]) in ln), "(NOT NAMED)")
        p.add(what, args, None, code, said, intact, took)
    said = next((ln for ln in lines if ln.startswith("would ingest")), "(no summary)")
    p.add("  ... the rest of that mirror", args, None, code, said, intact, took)
    p.refused("a FIFO given directly", ["ingest", "-q", str(named["fifo"])], timed=True)
    # -- a stalled LLM server: listens, never answers
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(16)
        url = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
        p.refused("an LLM server that accepts and never answers", ["doctor"],
                  {"LITRAG_LLM_URL": url}, pick="FAIL llm", timed=True)  # fmt: skip
    # -- other commands' arguments
    empty, listed = tmp / "empty.jsonl", tmp / "list.jsonl"
    empty.write_text("", encoding="utf-8")
    listed.write_text("[1]\n", encoding="utf-8")
    run = ["--books", str(BOOK.parent), "--chunkers", "paragraphs", "--modes", "bm25"]
    run += ["--out", str(tmp / "eval-out")]
    for what, qs in (("an empty question file", empty), ("a question line that is a list", listed)):
        p.refused(what, ["eval", "retrieval", "--questions", str(qs), *run])
    p.refused("eval --top-k -1", ["eval", "retrieval", "--questions", str(listed), *run,
                                  "--top-k", "-1"])  # fmt: skip
    for flags in (["--chapters", "x"], ["--chapters", "99"], ["--upto-chapter", "-2"],
                  ["--max-blocks", "-1"]):  # fmt: skip
        p.refused(f"assets {' '.join(flags)}", ["assets", "pg215", *flags])
    p.refused("a profile of a book without assets", ["characters", "pg215", "--profile", "buck"])
    for flags in (
        ["--to", "notaurl"],
        ["--to", ""],
        ["--to", "http://127.0.0.1:9", "--shards", "0"],
    ):
        p.refused(f"export {shlex.join(flags)}", ["export", *flags])
    merged = str(tmp / "merged")
    p.refused("distill export with nothing to export",
              ["distill", "export", "--model", "/nonexistent", "--out", merged])  # fmt: skip
    p.refused("distill config --config FOLDER", ["distill", "config", "--config", str(tmp)])
    # -- a book's source replaced by other text, then deleted (uploads clobbered them)
    home = p.home()
    src = tmp / "books" / "moved-215.txt"
    shutil.copy(book, src)
    rows = json.loads((home / "books.json").read_text(encoding="utf-8"))
    rows["pg215"]["source"] = str(src)
    (home / "books.json").write_text(json.dumps(rows, indent=1), encoding="utf-8")
    src.write_text(book.read_text(encoding="utf-8").replace("Buck", "Bick"), encoding="utf-8")
    for what, args in (("a book's source replaced by other text", ["verify"]),
                       ("  ... then the repair", ["verify", "--repair"])):  # fmt: skip
        code, out, err = p.cli(home, *args)
        p.add(what, args, None, code, p.said(out, err), "(reported; nothing ingested from it)")
    src.unlink()
    code, out, err = p.cli(home, "verify")
    p.add("a book's source deleted", ["verify"], None, code, p.said(out, err), "(reported)")


def run_spoiler_cases(p: Probe) -> None:
    """Issue 33: every CLI listing at ``--upto-chapter 1`` of the two-chapter library, searched
    for the name of each character first met in chapter II and for chapter II's title."""
    code, out, err = p.cli(p.home(), "characters", "pg215", "--json", "--top", "1000")
    if code != 0:
        raise SystemExit(f"litrag characters failed: {err}")
    later = [c["name"] for c in json.loads(out)["characters"] if c["first_chapter"] > 1]
    story, who = "What happens to Buck?", f"Who is {later[0]}?"
    limit = ["--upto-chapter", "1"]
    for args, asked in (
        (["characters", "pg215", *limit], None),
        (["characters", "pg215", *limit, "--json"], None),
        (["characters", "pg215", *limit, "--profile", later[0]], later[0]),
        (["ask", story, *limit, "--no-llm", "--full"], None),
        (["ask", story, *limit, "--no-llm", "--json"], None),
        (["ask", who, *limit, "--no-llm"], later[0]),
        (["ask", who, *limit, "--no-llm", "--json"], later[0]),
        (["ask", QUESTION, "--upto-chapter", "9", "--no-llm"], None),
        (["books"], None),
    ):
        code, out, err = p.cli(p.home(), *args)
        words = [*(n for n in later if n != asked), LATER_TITLE]
        leaked = sorted({w for w in words if re.search(rf"\b{re.escape(w)}\b", out + err)})
        verdict = f"NO: {', '.join(leaked)}" if leaked else f"none (of {len(words)} checked)"
        command = p.shown(f"litrag {shlex.join(args)}")
        p.spoilers.append(Row("", command, code, p.shown(p.said(out, err)), verdict))
        print(f"{code:>4}  spoilers {args[0]}: {verdict}", file=sys.stderr, flush=True)


def write(p: Probe, out: Path, seconds: float) -> None:
    head = [
        "# Reliability probe",
        "",
        "Generated by",
        "",
        "    PYTHONPATH=. python benchmarks/reliability_probe.py --out docs/reliability.md",
        "",
        "Each row is one `litrag` command run as a subprocess against its own copy of a small "
        "library (The Call of the Wild, chapters I-II: offline segmenter, packaged MiniLM, "
        "embedded Qdrant Edge), after the bad input or fault in the first column. *What it "
        "said* is its `error:` line (else its `warning:` line, else its first line); *intact* "
        "is whether the library was byte for byte unchanged on disk (a refused input; where "
        "the store engine rewrote its files on opening, what `litrag verify` said), or "
        "whether `litrag verify` passed afterwards (a repair). `$TMP` is the probe's "
        "temporary folder. The book carries terminal escape sequences in chapter I (for the "
        "row that prints it); the warning each ingest gives about them is left out of the "
        f"other rows. {len(p.rows) + len(p.spoilers)} commands, {seconds:.0f} s on "
        f"{os.cpu_count()} cores, {time.strftime('%Y-%m-%d')}.",
        "",
        "| input / fault | command | exit | what it said | library intact afterwards |",
        "|---|---|---:|---|---|",
    ]
    body = [f"| {r.what} | `{r.command}` | {r.code} | {r.said} | {r.intact} |" for r in p.rows]
    spoilers = [
        "",
        "## Listings at a spoiler limit",
        "",
        "Each command at `--upto-chapter 1` of the same library, its whole output searched for "
        "the name of every character first met in chapter II and for chapter II's title (a "
        "name the question itself asks about is not counted). The chat UI's panels are checked "
        "the same way by `tests/test_app.py::test_no_listing_names_what_comes_after_the_"
        "spoiler_limit`.",
        "",
        "| command | exit | what it said first | later names or titles shown |",
        "|---|---:|---|---|",
        *(f"| `{r.command}` | {r.code} | {r.said} | {r.intact} |" for r in p.spoilers),
    ]
    out.write_text("\n".join([*head, *body, *spoilers, ""]), encoding="utf-8")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "reliability.md")
    args = ap.parse_args()
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="litrag-probe-") as tmp:
        probe = Probe(Path(tmp))
        run_cases(probe)
        run_untrusted_cases(probe)
        run_spoiler_cases(probe)
        write(probe, args.out, time.perf_counter() - t0)
    bad = [r for r in probe.rows + probe.spoilers if r.intact.startswith("NO")]
    print(f"wrote {args.out}: {len(probe.rows)} rows, {len(bad)} not intact", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
