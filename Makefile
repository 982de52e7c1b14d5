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

.PHONY: test vet unit fuzz bench fmt build sink demo e2e clean bench-collector

## test: the project's test command (vet, race-enabled short tests, a short fuzz pass).
test: vet unit fuzz

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

## demo: store-and-forward shown end to end (about two minutes; needs nothing but Go).
demo: build sink
	$(GO) run ./cmd/demo -collector $(COLLECTOR) -sink $(SINK)

## e2e: a fixed OTLP payload through the ocb-built collector into the sink, every value checked.
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

clean:
	rm -rf $(BUILD)
