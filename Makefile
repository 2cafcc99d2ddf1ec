# ampy — the two commands a newcomer runs:
#   make demo   installs only what the demo needs (numpy, ml_dtypes, matplotlib) into .venv,
#               builds ampy in place (C files in parallel; CUDA only where a GPU driver is)
#               and runs the main job
#   make test   installs everything (torch, hypothesis, jupyter kernel, ...) into .venv and
#               runs every test (C, Python, ASan), compiling the CUDA extension wherever
#               nvcc is (AMPY_CUDA=1), so a CUDA compile error fails CI without a GPU;
#               `make test fuzz` (what .ci/run does) adds the libFuzzer runs
# and make notebook: jupyter on examples/amp_tour.ipynb.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
DEMO_ARGS ?=
# make test compiles the CUDA extension wherever nvcc is (1: a CUDA compile error fails the
# run, GPU or not); .ci/run exports AMPY_CUDA=1, which wins
AMPY_CUDA ?= $(if $(shell command -v nvcc 2>/dev/null || ls $${CUDA_HOME:-/usr/local/cuda}/bin/nvcc 2>/dev/null),1,auto)
CC ?= gcc
CSRC := $(wildcard csrc/*.c)
CFLAGS_TEST := -std=c11 -O1 -g -fno-math-errno -Wall -Wextra -Wno-unused-parameter \
	-Icsrc/include -fsanitize=address,undefined -fno-sanitize-recover=undefined
# libstdc++ is preloaded too: without it ASan cannot intercept C++ throws, and any
# exception torch raises inside a test (the side-by-side comparisons) aborts.
ASAN_ENV := LD_PRELOAD="$$($(CC) -print-file-name=libasan.so) $$($(CC) -print-file-name=libstdc++.so)" \
	PYTHONMALLOC=malloc \
	ASAN_OPTIONS=detect_leaks=0 UBSAN_OPTIONS=print_stacktrace=1
PYTEST_ARGS ?=

.PHONY: demo test test-long build build-demo ctest pytest asan fuzz bench notebook clean

$(PY):
	$(PYTHON) -m venv $(VENV)

# the demo's stamp: ampy (editable, package only: AMPY_SKIP_EXT) with numpy, ml_dtypes and
# matplotlib; the extension is built once, in place, by build-demo
$(VENV)/.deps-demo: pyproject.toml | $(PY)
	$(PY) -m pip install -q setuptools wheel "numpy>=2.0"
	AMPY_SKIP_EXT=1 $(PY) -m pip install -q --no-build-isolation -e ".[demo]"
	touch $@

# the notebook's stamp: the demo's, plus jupyter (the notebook extra)
$(VENV)/.deps-notebook: pyproject.toml | $(PY)
	$(PY) -m pip install -q setuptools wheel "numpy>=2.0"
	AMPY_SKIP_EXT=1 $(PY) -m pip install -q --no-build-isolation -e ".[demo,notebook]"
	touch $@

# everything the tests use (torch, hypothesis, the notebook's kernel, ...)
$(VENV)/.deps: pyproject.toml | $(PY)
	$(PY) -m pip install -q --upgrade pip setuptools wheel
	$(PY) -m pip install -q -e ".[test,demo]"
	touch $@

build-demo: $(VENV)/.deps-demo
	$(PY) setup.py -q build_ext --inplace

build: $(VENV)/.deps
	AMPY_CUDA=$(AMPY_CUDA) $(PY) setup.py -q build_ext --inplace

demo: build-demo
	$(PY) -m ampy.demo $(DEMO_ARGS)

notebook: $(VENV)/.deps-notebook
	$(PY) setup.py -q build_ext --inplace
	$(PY) -m jupyter notebook examples/amp_tour.ipynb

test: build ctest pytest asan

pytest: build
	AMPY_CUDA=$(AMPY_CUDA) $(PY) -m pytest -q $(PYTEST_ARGS)

# the default suite plus the long runs (AMPY_TEST_LONG=1: the 2^31-element tensors, the
# 10,000-step leak runs, 25x the fuzz cases); not part of make test
test-long: build
	AMPY_TEST_LONG=1 AMPY_CUDA=$(AMPY_CUDA) $(PY) -m pytest -q $(PYTEST_ARGS)

# C unit tests of libampy (elem.h and the kernels), under ASan + UBSan: csrc/ compiles once
# into a static library (objects rebuilt when a source or header changes), each test links it
CTEST_OBJ := $(patsubst csrc/%.c,tests/c/bin/obj/%.o,$(CSRC))
CTEST_LIB := tests/c/bin/libampy.a
CSRC_HDR := $(wildcard csrc/include/ampy/*.h csrc/*.h csrc/*.inc)

tests/c/bin/obj/%.o: csrc/%.c $(CSRC_HDR)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_TEST) -c $< -o $@

$(CTEST_LIB): $(CTEST_OBJ)
	rm -f $@ && ar rcs $@ $^

ctest: $(CTEST_LIB)
	@set -e; for t in $(wildcard tests/c/test_*.c); do \
		b=tests/c/bin/$$(basename $$t .c); \
		$(CC) $(CFLAGS_TEST) $$t $(CTEST_LIB) -o $$b -lm -lpthread; \
		echo "== $$b"; ASAN_OPTIONS=detect_leaks=1 ./$$b; \
	done

# The C core built with -fsanitize=address,undefined, running the cast,
# element-wise, foreign-memory (read-only, misaligned) and write-check Python
# tests (shortened) against it.
asan: $(VENV)/.deps
	rm -rf build/asan && mkdir -p build/asan
	cp -r ampy build/asan/ && rm -f build/asan/ampy/*.so
	AMPY_SANITIZE=1 $(PY) setup.py -q build_ext --build-temp build/asan-tmp --build-lib build/asan
	cd build/asan && $(ASAN_ENV) AMPY_TEST_SHORT=1 ../../$(PY) -m pytest -q -p no:cacheprovider \
		$(addprefix ../../,$(wildcard tests/test_cast.py tests/test_elementwise.py tests/test_elementwise_strided.py tests/test_tensor.py tests/test_leaks.py \
		tests/test_foreign_memory.py tests/test_write_checks.py))

# libFuzzer targets for the cast and finite/unscale kernels (fuzz/), built with
# clang -fsanitize=fuzzer,address,undefined, each run FUZZ_TIME seconds from the
# seed corpus in fuzz/corpus/<target>/ (new inputs go to build/fuzz/, not git).
# Not part of `make test` (CI runs `make test fuzz`): it installs clang-14 with
# apt-get when no clang is found, which needs root.
FUZZ_TIME ?= 30
FUZZ_SRC := csrc/cast.c csrc/cast_x86.c csrc/cpu.c csrc/iter.c csrc/parallel.c csrc/status.c \
	csrc/finite.c csrc/finite_x86.c
FUZZ_CFLAGS := -std=c11 -O1 -g -fno-math-errno -fno-strict-aliasing -Icsrc/include \
	-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined

fuzz:
	@set -e; cc=$$(command -v clang-14 || command -v clang || true); \
	if [ -z "$$cc" ]; then \
		echo "fuzz: no clang found; installing clang-14 + libclang-rt-14-dev with apt-get"; \
		{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
			clang-14 libclang-rt-14-dev >/dev/null; } || { echo "fuzz: could not install \
		clang-14 (needs root and apt-get); install clang with libFuzzer and rerun" >&2; exit 1; }; \
		cc=clang-14; fi; \
	mkdir -p build/fuzz; \
	for t in cast finite; do \
		$$cc $(FUZZ_CFLAGS) fuzz/fuzz_$$t.c $(FUZZ_SRC) -o build/fuzz/fuzz_$$t -lm -lpthread || \
			{ echo "fuzz: $$cc could not build with -fsanitize=fuzzer (is libclang-rt-dev installed?)" >&2; exit 1; }; \
		rm -rf build/fuzz/corpus_$$t && mkdir -p build/fuzz/corpus_$$t; \
		echo "== fuzz_$$t ($(FUZZ_TIME) s)"; \
		(cd build/fuzz && ./fuzz_$$t -max_total_time=$(FUZZ_TIME) -print_final_stats=1 \
			-timeout=20 corpus_$$t ../../fuzz/corpus/$$t > fuzz_$$t.log 2>&1) || \
			{ tail -n 60 build/fuzz/fuzz_$$t.log; echo "fuzz: fuzz_$$t failed (input saved in build/fuzz/)" >&2; exit 1; }; \
		grep -E "^stat::(number_of_executed_units|average_exec_per_sec|new_units_added)" build/fuzz/fuzz_$$t.log; \
	done

bench: build
	@for b in benchmarks/bench_*.py; do echo "== $$b"; $(PY) $$b; done

clean:
	rm -rf build tests/c/bin ampy/*.so
