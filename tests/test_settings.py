"""Settings read from the environment: defaults that follow the configured LLM, numbers that are
checked (and named, in one line, when the CLI meets a bad one), and the data directory."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from litrag.settings import DEFAULT_FOCUS_WORDS, Settings, SettingsError, focus_words, home


def test_home_follows_litrag_home(monkeypatch, tmp_path):
    monkeypatch.setenv("LITRAG_HOME", str(tmp_path))
    assert home() == tmp_path == Settings().home
    monkeypatch.delenv("LITRAG_HOME")
    assert home() == Path.home() / ".litrag"


def test_focus_defaults_follow_the_llm():
    assert focus_words(Settings(llm_url=None)) == DEFAULT_FOCUS_WORDS
    assert focus_words(Settings(llm_url="http://gpu:8000/v1")) == 0
    assert focus_words(Settings(llm_url="http://gpu:8000/v1", focus_words=80)) == 80
    assert focus_words(Settings(llm_url=None, focus_words=0)) == 0


def test_numbers_from_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("LITRAG_FOCUS_WORDS", " 80 ")
    monkeypatch.setenv("LITRAG_LLM_TIMEOUT", "30.5")
    monkeypatch.setenv("LITRAG_LLM_CONTEXT", "")
    s = Settings()
    assert (s.focus_words, s.llm_timeout, s.llm_context) == (80, 30.5, 4096)
    monkeypatch.setenv("LITRAG_FOCUS_WORDS", "many")
    with pytest.raises(SettingsError, match="LITRAG_FOCUS_WORDS must be a whole number"):
        Settings()
    # the CLI says which variable is wrong, in one line, instead of a traceback
    env = {**os.environ, "LITRAG_HOME": str(tmp_path), "LITRAG_LLM_CONTEXT": "4k"}
    env.pop("LITRAG_FOCUS_WORDS")
    proc = subprocess.run(
        [sys.executable, "-m", "litrag.cli", "books"], env=env, capture_output=True, text=True
    )
    assert proc.returncode == 2
    assert proc.stderr.strip() == "error: LITRAG_LLM_CONTEXT must be a whole number, got '4k'"
