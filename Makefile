# Two commands on a fresh machine: `make demo` (install + run the embedded default) and `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
# llama-cpp-python has no binary wheel: it compiles (about 7 min with these flags, 15 without);
# pip's wheel cache makes later installs fast.
LLAMA_CMAKE_ARGS := -DLLAVA_BUILD=OFF -DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON

.PHONY: install demo test test-fast chromium clean-runs

$(VENV)/.installed: pyproject.toml
	$(PY) -m venv $(VENV)
	# torch first, pinned: an open torch requirement pulls a multi-GB CUDA build
	$(BIN)/pip install torch==2.13.0
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(BIN)/pip install -e '.[dev]'
	touch $@

install: $(VENV)/.installed

demo: install
	$(BIN)/perseval run configs/experiments/quickstart.yaml

# Debian's Chromium for the MLflow UI browser test (Playwright drives it; browser downloads fail here).
# Best effort, about 2-3 minutes once: without it that one test is skipped, with the reason.
chromium:
	@command -v chromium >/dev/null || apt-get install -y chromium >/dev/null 2>&1 \
	  || (apt-get update >/dev/null 2>&1 && apt-get install -y chromium >/dev/null 2>&1) \
	  || echo "chromium could not be installed: tests/test_ui_browser.py will be skipped"

test: install chromium
	$(BIN)/pytest

test-fast: install
	$(BIN)/pytest -m "not integration"

clean-runs:
	rm -rf runs
