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
