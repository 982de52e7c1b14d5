# questdbexporter — build, test and demo entry points.
GO       ?= go
FUZZTIME ?= 10s

# Native Go fuzz targets run briefly by `make test`: "package:FuzzName" pairs.
FUZZ_TARGETS ?=

.PHONY: test vet unit fuzz bench fmt

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
