package qwp

import "fmt"

// Category classifies an error, whether the server reported it or the
// client concluded it (ProtocolViolation, DataLoss), for choosing a Policy.
type Category int

// Categories of errors, after the store-and-forward contract.
const (
	CategoryNone              Category = iota // not an error: OK or a durable ack
	CategorySchemaMismatch                    // the batch does not match the table
	CategoryParseError                        // the server cannot parse the batch
	CategoryInternalError                     // catch-all server fault
	CategorySecurityError                     // authorization failure
	CategoryWriteError                        // the table is not accepting writes now
	CategoryDictionaryGap                     // symbol ids the connection has not registered
	CategoryNotWritable                       // the node cannot serve writes
	CategoryUnknown                           // a status this client does not know
	CategoryProtocolViolation                 // the same batch rejected too many times in a row
	CategoryDataLoss                          // the client set unreplayable data aside
)

var categoryNames = [...]string{
	CategoryNone: "NONE", CategorySchemaMismatch: "SCHEMA_MISMATCH", CategoryParseError: "PARSE_ERROR",
	CategoryInternalError: "INTERNAL_ERROR", CategorySecurityError: "SECURITY_ERROR",
	CategoryWriteError: "WRITE_ERROR", CategoryDictionaryGap: "DICTIONARY_GAP",
	CategoryNotWritable: "NOT_WRITABLE", CategoryUnknown: "UNKNOWN",
	CategoryProtocolViolation: "PROTOCOL_VIOLATION", CategoryDataLoss: "DATA_LOSS",
}

// String returns the category's name as the store-and-forward contract
// spells it.
func (c Category) String() string {
	if c >= 0 && int(c) < len(categoryNames) {
		return categoryNames[c]
	}
	return fmt.Sprintf("Category(%d)", int(c))
}

// Category maps a response status to its error category. Statuses this
// package does not know, including egress-only ones, are CategoryUnknown.
func (s Status) Category() Category {
	switch s {
	case StatusOK, StatusDurableAck, StatusLocalDurableAck:
		return CategoryNone
	case StatusSchemaMismatch:
		return CategorySchemaMismatch
	case StatusParseError:
		return CategoryParseError
	case StatusInternalError:
		return CategoryInternalError
	case StatusSecurityError:
		return CategorySecurityError
	case StatusWriteError:
		return CategoryWriteError
	case StatusNotWritable:
		return CategoryNotWritable
	case StatusDictionaryGap:
		return CategoryDictionaryGap
	}
	return CategoryUnknown
}

// Policy is what the client does about an error.
type Policy int

// Policies. None of them drops a batch and carries on.
const (
	// PolicyTerminal stops sending; later calls fail. The data is kept.
	PolicyTerminal Policy = iota + 1
	// PolicyRetriable reconnects and replays from the acknowledged point.
	PolicyRetriable
	// PolicyRetriableOther is PolicyRetriable on the next endpoint.
	PolicyRetriableOther
	// PolicyAbandoned applies only to CategoryDataLoss: the data will
	// never be sent.
	PolicyAbandoned
)

var policyNames = [...]string{
	PolicyTerminal: "terminal", PolicyRetriable: "retriable",
	PolicyRetriableOther: "retriable_other", PolicyAbandoned: "abandoned",
}

// String returns the policy as configuration spells it.
func (p Policy) String() string {
	if p > 0 && int(p) < len(policyNames) {
		return policyNames[p]
	}
	return fmt.Sprintf("Policy(%d)", int(p))
}

// ParsePolicy parses a configurable policy: "terminal", "retriable" or
// "retriable_other".
func ParsePolicy(s string) (Policy, error) {
	for _, p := range []Policy{PolicyTerminal, PolicyRetriable, PolicyRetriableOther} {
		if s == p.String() {
			return p, nil
		}
	}
	return 0, fmt.Errorf("qwp: error policy %q is not one of terminal, retriable, retriable_other", s)
}

// DefaultPolicy is the category's policy when no override applies.
// CategoryNone has none (0).
func (c Category) DefaultPolicy() Policy {
	switch c {
	case CategorySchemaMismatch, CategoryParseError, CategorySecurityError, CategoryProtocolViolation:
		return PolicyTerminal
	case CategoryWriteError, CategoryInternalError, CategoryDictionaryGap, CategoryUnknown:
		return PolicyRetriable
	case CategoryNotWritable:
		return PolicyRetriableOther
	case CategoryDataLoss:
		return PolicyAbandoned
	}
	return 0
}

// Overridable reports whether configuration may replace the category's
// default policy. UNKNOWN and PROTOCOL_VIOLATION are forced, and DATA_LOSS
// has the only policy that fits it.
func (c Category) Overridable() bool {
	switch c {
	case CategorySchemaMismatch, CategoryParseError, CategorySecurityError, CategoryWriteError,
		CategoryInternalError, CategoryDictionaryGap, CategoryNotWritable:
		return true
	}
	return false
}
