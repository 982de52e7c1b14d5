# questdbexporter — build, test and demo entry points.
GO       ?= go
# A count of executions, not a duration: with a duration, an execution still
# running when the deadline passes (the sfqueue targets build a slot on disk
# each time) fails the run with "context deadline exceeded" and no input.
FUZZTIME ?= 1000x

# Native Go fuzz targets run briefly by `make test`: "package:FuzzName" pairs.
FUZZ_TARGETS ?= ./qwp:FuzzDecodeResponse ./qwp:FuzzEncoderRoundTrip \
	./qwp/qwptest:FuzzDecodeMessage ./qwp/qwptest:FuzzExec \
	./sfqueue:FuzzSegmentCorruption ./sfqueue:FuzzAckWatermarkCorruption \
	./sfqueue:FuzzSymbolDictCorruption ./internal/datamodel:FuzzAttrJSON

OCB_VERSION := v0.165.0
BUILD       := $(CURDIR)/_build
OCB         := $(BUILD)/bin/builder
COLLECTOR   := $(BUILD)/otelcol-questdb
SINK        := $(BUILD)/qwpsink

.PHONY: test vet unit fuzz bench fmt build sink demo e2e clean bench-collector agent fleet fleet-short manifests image image-local image-check

## test: the project's test command (vet, race-enabled short tests, a short fuzz pass,
## the deploy/ manifests checked and the fleet test's short variant).
test: vet unit fuzz manifests fleet-short

vet:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$unformatted" ]; then echo "gofmt needed: $$unformatted"; exit 1; fi
	$(GO) vet ./...

unit:
	$(GO) test -short -race -count=1 -timeout 20m ./...

fuzz:
	@for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; name=$${t##*:}; \
		echo "fuzz $$pkg $$name ($(FUZZTIME))"; \
		$(GO) test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
	done

## bench: every benchmark once, for BENCHMARKS.md.
bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

fmt:
	gofmt -w $$(git ls-files '*.go')

## generate: regenerate internal/metadata and generated_*_test.go from metadata.yaml.
# mdatagen runs from its own tools module (internal/tools) so its dependencies
# stay out of go.mod. It names the generated test package after the folder
# holding metadata.yaml, so it is pointed at the repository through a symlink
# called questdbexporter: the output then does not depend on the checkout's name.
.PHONY: generate
generate:
	@tmp=$$(mktemp -d) && ln -s "$(CURDIR)" "$$tmp/questdbexporter" && \
	(cd internal/tools && $(GO) run go.opentelemetry.io/collector/cmd/mdatagen "$$tmp/questdbexporter/metadata.yaml"); \
	rc=$$?; rm -f "$$tmp/questdbexporter"; rmdir "$$tmp"; exit $$rc

## build: the collector with this exporter, built by ocb into _build/otelcol-questdb,
## and beside it the slot tool _build/questdb-slot (cmd/questdb-slot).
build: $(OCB)
	$(OCB) --config builder-config.yaml
	$(GO) build -o $(BUILD)/questdb-slot ./cmd/questdb-slot

$(OCB):
	GOBIN=$(BUILD)/bin $(GO) install go.opentelemetry.io/collector/cmd/builder@$(OCB_VERSION)

## sink: the QWP test server (cmd/qwpsink) as a binary.
sink:
	$(GO) build -o $(SINK) ./cmd/qwpsink

## demo: store-and-forward shown end to end, with a bulk load of QWP messages over 64 KiB
## (about two minutes; needs nothing but Go).
demo: build sink
	$(GO) run ./cmd/demo -collector $(COLLECTOR) -sink $(SINK)

## e2e: a fixed OTLP payload through the ocb-built collector into the sink, every value checked,
## then a bulk load whose QWP messages run past 64 KiB (the largest is printed and checked).
e2e: build sink
	$(GO) run ./cmd/demo -mode e2e -collector $(COLLECTOR) -sink $(SINK)

## bench-collector: the whole collector under OTLP/HTTP load, questdb beside nop and
## otlp_http (cmd/benchcollector; minutes per round). BENCH_FLAGS passes flags,
## e.g. BENCH_FLAGS='-rounds 9 -concurrency 8'. Not part of `make test`.
BENCH_COLLECTOR := $(BUILD)/bench/otelcol-bench
BENCH_FLAGS     ?=
bench-collector: $(OCB) sink
	cd bench && $(OCB) --config builder-config.yaml
	$(GO) build -o $(BUILD)/benchcollector ./cmd/benchcollector
	$(BUILD)/benchcollector -collector $(BENCH_COLLECTOR) -sink $(SINK) $(BENCH_FLAGS)

## agent: the fleet's agent collector (deploy/agent/builder-config.yaml: OTLP in,
## contrib loadbalancing exporter out) at v0.159.0, the newest loadbalancingexporter
## the module proxy serves; its own module in _build/agent, the root go.mod untouched.
AGENT_OCB_VERSION := v0.159.0
AGENT_OCB         := $(BUILD)/bin-$(AGENT_OCB_VERSION)/builder
AGENT             := $(BUILD)/agent/otelcol-agent
agent: $(AGENT_OCB)
	cd deploy/agent && $(AGENT_OCB) --config builder-config.yaml

$(AGENT_OCB):
	GOBIN=$(dir $(AGENT_OCB)) $(GO) install go.opentelemetry.io/collector/cmd/builder@$(AGENT_OCB_VERSION)

## fleet: an agent with the loadbalancing exporter in front of three gateways, through
## a rolling restart, a SIGKILL and a scale-down to two during a QuestDB outage whose
## stranded slot questdb-slot drains (cmd/demo -mode fleet; README "Running a fleet").
## FLEET_FLAGS passes flags; fleet-short is the variant `make test` runs.
FLEET_FLAGS ?= -duration 120s -outage-for 30s -points-per-tick 100
FLEET_RUN    = $(GO) run ./cmd/demo -mode fleet -collector $(COLLECTOR) -sink $(SINK) \
	-agent $(AGENT) -slot-tool $(BUILD)/questdb-slot -workdir $(BUILD)/fleet
fleet: build sink agent
	$(FLEET_RUN) $(FLEET_FLAGS)

fleet-short: build sink agent
	$(FLEET_RUN) -duration 12s -outage-for 8s -points-per-tick 20

## manifests: deploy/'s Kubernetes manifests decoded strictly against k8s.io/api and
## their collector configurations run through `validate` (deploy/manifestcheck).
manifests: build agent
	cd deploy/manifestcheck && QUESTDB_COLLECTOR=$(COLLECTOR) AGENT_COLLECTOR=$(AGENT) \
		$(GO) test -count=1 ./...

## image: the container image (deploy/image/Containerfile) with docker or podman.
## ENGINE names the engine command (default: podman if installed, else docker),
## e.g. ENGINE='podman --runtime runc'.
IMAGE  ?= otelcol-questdb:dev
ENGINE ?=
# Sets $$engine, or says why no engine can build (podman's info needs its
# service, docker's its daemon) and fails.
PICK_ENGINE = engine='$(ENGINE)'; \
	if [ -z "$$engine" ]; then engine=$$(command -v podman || command -v docker) || { \
		echo "make $@: neither podman nor docker is installed; install one to build $(IMAGE)"; exit 1; }; fi; \
	if ! $$engine info >/dev/null 2>&1; then \
		echo "make $@: $$engine cannot reach a container engine ($$engine info fails)"; exit 1; fi
image:
	@$(PICK_ENGINE); \
	echo "make image: building $(IMAGE) with $$engine"; \
	$$engine build -f deploy/image/Containerfile -t $(IMAGE) .

## image-local: the same image without a registry (deploy/image/Containerfile.local,
## FROM scratch): Containerfile's build steps run with the host's Go, the host's
## CA bundle (CA_BUNDLE) copied in. For machines that reach no registry.
CA_BUNDLE     ?= /etc/ssl/certs/ca-certificates.crt
IMAGE_CONTEXT := $(BUILD)/image
image-local: $(OCB)
	@$(PICK_ENGINE); \
	[ -r "$(CA_BUNDLE)" ] || { echo "make image-local: no CA bundle at $(CA_BUNDLE) (set CA_BUNDLE)"; exit 1; }; \
	set -e; \
	CGO_ENABLED=0 $(OCB) --config builder-config.yaml; \
	CGO_ENABLED=0 $(GO) build -trimpath -o $(BUILD)/questdb-slot ./cmd/questdb-slot; \
	rm -rf $(IMAGE_CONTEXT); mkdir -p $(IMAGE_CONTEXT)/questdb; \
	cp $(COLLECTOR) $(BUILD)/questdb-slot deploy/image/config.yaml $(IMAGE_CONTEXT)/; \
	cp $(CA_BUNDLE) $(IMAGE_CONTEXT)/ca-certificates.crt; \
	printf 'root:x:0:0:root:/root:/sbin/nologin\notelcol:x:10001:10001:otelcol:/nonexistent:/sbin/nologin\n' >$(IMAGE_CONTEXT)/passwd; \
	printf 'root:x:0:\notelcol:x:10001:\n' >$(IMAGE_CONTEXT)/group; \
	echo "make image-local: building $(IMAGE) with $$engine from $(IMAGE_CONTEXT)"; \
	$$engine build -f deploy/image/Containerfile.local -t $(IMAGE) $(IMAGE_CONTEXT)

## image-check: runs the image $(IMAGE) (make image or image-local first) the way the
## gateways do: validate, then OTLP in, QuestDB (qwpsink) out, its slot on a named
## volume, stranded by a stop during an outage, inspected by the image's questdb-slot
## and drained by the drain Job's salvage, then once more by a restart (cmd/demo -mode image). Host networking; IMAGE_RUN_FLAGS
## adds `run` flags, e.g. IMAGE_RUN_FLAGS='--ulimit nofile=20000:20000'. Not in `make test`.
IMAGE_RUN_FLAGS ?=
image-check: sink
	@$(PICK_ENGINE); \
	$(GO) run ./cmd/demo -mode image -engine "$$engine" -image $(IMAGE) -run-flags '$(IMAGE_RUN_FLAGS)' \
		-sink $(SINK) -workdir $(BUILD)/image-check

clean:
	rm -rf $(BUILD)
