"""``litrag distill`` on bad arguments (issue 34): each is one ``error:`` line naming the flag or
file, exit 2, and nothing written, through the CLI's own entry on a real book; the dead teacher
is a real closed port, the stalled one a real socket that accepts and never answers."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_answer import free_port
from test_doctor import silent_server  # noqa: F401  (fixture)

from litrag.cli import main

WILD = "pg215_call_of_the_wild.txt"


def distill(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], home: Path, *args: str
) -> tuple[int, str, list[str]]:
    monkeypatch.setenv("LITRAG_HOME", str(home))
    code = main(["distill", *args])
    out, err = capsys.readouterr()
    return code, out, err.splitlines()


def test_annotate_refuses_bad_arguments_before_writing(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    books_dir: Path,
    silent_server: str,  # noqa: F811
) -> None:
    dead = f"http://127.0.0.1:{free_port()}/v1"
    out = tmp_path / "ann"
    base = ["annotate", str(books_dir / WILD), "--model", "m", "-q"]
    cases = [
        # a dead teacher was a raw LLMUnavailableError, after creating OUT/cache
        ([*base, "--llm-url", dead, "--out", str(out), "--chapters", "1"],
         f"error: --llm-url: the teacher LLM server at {dead} is unreachable (connection refused)"),
        ([*base, "--llm-url", silent_server, "--out", str(out)],
         f"error: --llm-url: the teacher LLM server at {silent_server} is unreachable (timed out)"),
        ([*base, "--llm-url", dead, "--out", str(out), "--chapters", "x"],  # was int()'s message
         "error: --chapters wants chapter indices like 1,2, got 'x'"),
        ([*base, "--llm-url", dead, "--out", str(out), "--workers", "0"],
         "error: --workers must be at least 1, got 0"),
        ([*base, "--llm-url", "notaurl", "--out", str(out)],
         "error: --llm-url must be a URL starting with http:// or https://, got 'notaurl'"),
    ]  # fmt: skip
    for argv, line in cases:
        code, stdout, err = distill(monkeypatch, capsys, tmp_path / "home", *argv)
        assert (code, stdout) == (2, ""), (argv, err)
        assert len(err) == 1 and err[0].startswith(line), (argv, err)
        assert not out.exists(), argv  # no folder, no reply cache


def test_annotate_out_that_cannot_be_made_is_one_line(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    books_dir: Path,
) -> None:
    """``--out /proc/nope`` was a raw FileNotFoundError; the teacher must answer to get there,
    so it is a real HTTP server (one that answers 404 to everything: alive, not an LLM)."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
    from threading import Thread

    class NotFound(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_error(404)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), NotFound)
    Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/v1"
        blocker = tmp_path / "a-file"
        blocker.write_text("x")
        for out, line in (
            ("/proc/nope", "error: --out /proc/nope: cannot create the folder ("),
            (str(blocker), f"error: --out {blocker} is a file, not a folder"),
            (str(blocker / "sub"), f"error: --out {blocker / 'sub'}: cannot create the folder ("),
        ):
            argv = ["annotate", str(books_dir / WILD), "--llm-url", url, "--model", "m"]
            code, stdout, err = distill(monkeypatch, capsys, tmp_path / "home", *argv, "--out", out)
            assert (code, stdout) == (2, "") and len(err) == 1, err
            assert err[0].startswith(line), err
    finally:
        server.shutdown()
        server.server_close()


def test_config_and_export_refuse_bad_paths(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    folder = tmp_path / "a-folder"
    folder.mkdir()
    merged = tmp_path / "merged"
    cases = [
        (["config", "--config", str(folder)],  # was IsADirectoryError, an unexpected failure
         f"error: config file {folder} cannot be read: "),
        (["export", "--model", "/nonexistent", "--out", str(merged)],  # exited 0, doing nothing
         "error: nothing to export: give --adapter (merge it into --model) and/or --gguf FILE"),
        (["export", "--model", "/nonexistent", "--out", str(merged), "--gguf", "x.gguf"],
         "error: --model /nonexistent does not exist"),
        (["export", "--model", str(folder), "--adapter", "/nope", "--out", str(merged)],
         "error: --adapter /nope does not exist"),
        (["sft", "--model", str(folder), "--data", str(folder), "--out", str(merged),
          "--max-steps", "0"],
         "error: --max-steps must be at least 1, got 0"),
    ]  # fmt: skip
    for argv, line in cases:
        code, stdout, err = distill(monkeypatch, capsys, tmp_path / "home", *argv)
        assert (code, stdout) == (2, ""), (argv, err)
        assert len(err) == 1 and err[0].startswith(line), (argv, err)
        assert not merged.exists()
