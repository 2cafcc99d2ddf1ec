# ampy — the two commands a newcomer runs:
#   make demo   installs everything into .venv and runs the main job
#   make test   installs everything into .venv and runs every test (C, Python, ASan)
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
CC ?= gcc
CSRC := $(wildcard csrc/*.c)
CFLAGS_TEST := -std=c11 -O1 -g -fno-math-errno -Wall -Wextra -Wno-unused-parameter \
	-Icsrc/include -fsanitize=address,undefined -fno-sanitize-recover=undefined
ASAN_ENV := LD_PRELOAD=$$($(CC) -print-file-name=libasan.so) PYTHONMALLOC=malloc \
	ASAN_OPTIONS=detect_leaks=0 UBSAN_OPTIONS=print_stacktrace=1
PYTEST_ARGS ?=

.PHONY: demo test build ctest pytest asan bench clean

$(VENV)/.deps: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip setuptools wheel
	$(PY) -m pip install -q -e ".[test,demo]"
	touch $@

build: $(VENV)/.deps
	$(PY) setup.py -q build_ext --inplace

demo: build
	$(PY) -m ampy.demo

test: build ctest pytest asan

pytest: build
	$(PY) -m pytest -q $(PYTEST_ARGS)

# C unit tests of libampy (elem.h and the kernels), under ASan + UBSan
ctest:
	@mkdir -p tests/c/bin
	@set -e; for t in $(wildcard tests/c/test_*.c); do \
		b=tests/c/bin/$$(basename $$t .c); \
		$(CC) $(CFLAGS_TEST) $$t $(CSRC) -o $$b -lm -lpthread; \
		echo "== $$b"; ASAN_OPTIONS=detect_leaks=1 ./$$b; \
	done

# The C core built with -fsanitize=address,undefined, running the cast and
# element-wise Python tests (shortened) against it.
asan: $(VENV)/.deps
	rm -rf build/asan && mkdir -p build/asan
	cp -r ampy build/asan/ && rm -f build/asan/ampy/*.so
	AMPY_SANITIZE=1 $(PY) setup.py -q build_ext --build-temp build/asan-tmp --build-lib build/asan
	cd build/asan && $(ASAN_ENV) AMPY_TEST_SHORT=1 ../../$(PY) -m pytest -q -p no:cacheprovider \
		$(addprefix ../../,$(wildcard tests/test_cast.py tests/test_elementwise.py tests/test_tensor.py tests/test_leaks.py))

bench: build
	@for b in benchmarks/bench_*.py; do echo "== $$b"; $(PY) $$b; done

clean:
	rm -rf build tests/c/bin ampy/*.so
