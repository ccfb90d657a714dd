# The two commands of the README: `make standalone` and `make test`.
# Both create the virtualenv and install what they need on first use.

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: standalone test bench fuzz clean docker-images

# The C extensions (pyrmq/codec/_native.c, pyrmq/store/_syncer.c) are compiled by the editable install:
# rebuilt when one changes.
$(VENV)/.installed: pyproject.toml pyrmq/codec/_native.c pyrmq/store/_syncer.c
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q -U pip
	$(PY) -m pip install -q -e ".[test,spark]"
	touch $@

standalone: $(VENV)/.installed
	$(PY) -m pyrmq standalone -c conf/standalone.conf --namesrv-port 9876

# ensure-toolchains also starts a private Docker engine (root only); it is stopped whatever pytest says.
test: $(VENV)/.installed
	bash scripts/ensure-toolchains
	status=0; $(PY) -m pytest || status=$$?; bash scripts/dockerd-private stop; exit $$status

# pyrmq-base (debootstrap of Debian bookworm, no image registry), pyrmq:latest, pyrmq-jdk:latest;
# the engine is DOCKER_HOST's, else the private one (scripts/dockerd-private start).
docker-images:
	DOCKER_HOST=$${DOCKER_HOST:-unix:///run/pyrmq-docker/docker.sock} $(PYTHON) scripts/docker_images.py

bench: $(VENV)/.installed
	$(PY) bench/send_pull.py

# A million fuzz inputs over the decoders and recovery (atheris), then 100,000 mutated frames
# against a running broker; figures in docs/RELIABILITY.md.
fuzz: $(VENV)/.installed
	$(PY) bench/fuzz.py --inputs 1000000
	$(PY) -m tests.fuzz.netfuzz --batches 500 --frames 200

clean:
	rm -rf $(VENV) .pyrmq compat_tests/.cache compat_tests/java/target build pyrmq/codec/*.so
