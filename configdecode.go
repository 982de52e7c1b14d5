package questdbexporter

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
)

var (
	_ component.Config    = (*Config)(nil)
	_ confmap.Unmarshaler = (*Config)(nil)
)

// replacedKeys are exporterhelper's keys, which most exporters take and
// this one refuses: what does their job here.
var replacedKeys = []struct{ key, instead string }{
	{"sending_queue", "this exporter has no in-memory sending queue: its store-and-forward queue is the queue; " +
		"choose where with sf_dir (\"\" = memory only), size it with sf_max_total_bytes, " +
		"set its durability with sf_durability and what a full queue does with on_full (README, Sizing)"},
	{"retry_on_failure", "this exporter retries on its own, forever, and never drops data: " +
		"tune the reconnect backoff with reconnect_initial_backoff and reconnect_max_backoff"},
	{"timeout", "a consume call waits only for room in the queue, at most sf_append_deadline (and never past the caller's deadline); " +
		"shutdown waits close_flush_timeout for acknowledgements"},
}

// textHints say what to write for the text keys whose values are a fixed
// set or a format, when YAML read the value as a boolean or a number.
var textHints = map[string]string{
	"request_durable_ack":    "write on, off, local, replicated or local,replicated (request_durable_ack: on)",
	"ttl":                    "write a whole number and a unit h, d, w, M or y (ttl: 30d)",
	"sf_durability":          "write memory, periodic or flush",
	"on_full":                "write block or evict_oldest",
	"on_server_error":        "write auto, terminal, retriable or retriable_other",
	"metric_attributes_type": "write symbol or varchar",
}

// credentialKeys are the keys whose empty value after ${env:VAR} expansion
// is worth a warning at start: the server will refuse the connection.
var credentialKeys = []string{"username", "password", "token"}

// Unmarshal refuses, before decoding, what the decoder would take silently
// or refuse in its own words, each with the key and what to write: a bare
// number for a duration (the decoder reads it as nanoseconds, so
// "reconnect_max_backoff: 5" would reconnect in a loop), a fractional size
// or count (truncated: 0.5 would mean the default, max_in_flight: 1.5 would
// be 1), a value of the wrong YAML
// type, exporterhelper's keys (sending_queue, retry_on_failure, timeout),
// and a sender_id that expanded to nothing (an unset ${env:POD_NAME}: every
// pod of a fleet would take the same slot). It records credential keys
// that expanded to nothing, for the warning at start.
func (c *Config) Unmarshal(conf *confmap.Conf) error {
	var errs []error
	for _, r := range replacedKeys {
		if conf.IsSet(r.key) {
			errs = append(errs, fmt.Errorf("%s: not supported by the questdb exporter; %s", r.key, r.instead))
		}
	}
	t := reflect.TypeOf(*c)
	for i := range t.NumField() {
		key := t.Field(i).Tag.Get("mapstructure")
		if key == "" || !conf.IsSet(key) {
			continue
		}
		if err := checkRawValue(key, t.Field(i).Type, conf.Get(key)); err != nil {
			errs = append(errs, err)
		}
	}
	if conf.IsSet("sender_id") && isEmptyValue(conf.Get("sender_id")) {
		errs = append(errs, errors.New("sender_id: empty; it is usually a variable that is not set (sender_id: ${env:POD_NAME} without POD_NAME), "+
			"and every collector with this configuration would then use the same slot name: set the variable, or remove the key to name the slot after the component ID"))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	c.emptyCredentials = nil
	for _, key := range credentialKeys {
		if conf.IsSet(key) && isEmptyValue(conf.Get(key)) {
			c.emptyCredentials = append(c.emptyCredentials, key)
		}
	}
	return conf.Unmarshal(c)
}

// checkRawValue checks a raw configuration value against its field's type,
// before the decoder sees it.
func checkRawValue(key string, typ reflect.Type, v any) error {
	switch typ {
	case reflect.TypeOf(time.Duration(0)):
		switch x := v.(type) {
		case string:
			if _, err := time.ParseDuration(x); err != nil {
				return fmt.Errorf("%s: %q is not a duration; write a number and a unit ns, us, ms, s, m or h without a space (%s: 5s)", key, x, key)
			}
		default:
			if isNumber(v) {
				return fmt.Errorf("%s: %v has no unit, and a bare number would be nanoseconds; write a duration such as 5s or 250ms", key, v)
			}
		}
		return nil
	case reflect.TypeOf(ByteSize(0)):
		if x, ok := v.(float64); ok && x != math.Trunc(x) {
			return fmt.Errorf("%s: %v is not a whole number of bytes; write bytes or a size such as 512KiB or 4MiB", key, v)
		}
		return nil
	}
	switch typ.Kind() {
	case reflect.String:
		what := ""
		switch {
		case isBool(v):
			what = "a boolean"
		case isNumber(v):
			what = "a number"
		default:
			return nil
		}
		hint, ok := textHints[key]
		if !ok {
			hint = fmt.Sprintf("write it as text in quotes (%s: %q)", key, fmt.Sprint(v))
		}
		return fmt.Errorf("%s: %v is %s; %s", key, v, what, hint)
	case reflect.Bool:
		if v != nil && !isBool(v) {
			return fmt.Errorf("%s: %s is not a boolean; write true or false", key, quoteRaw(v))
		}
	case reflect.Int:
		switch x := v.(type) {
		case string:
			if _, err := strconv.Atoi(x); err != nil {
				return fmt.Errorf("%s: %q is not a whole number; write one such as %d", key, x, exampleInt(key))
			}
		case float64, float32:
			// The decoder would truncate: max_in_flight: 1.5 would be 1.
			f := reflect.ValueOf(x).Float()
			if f != math.Trunc(f) {
				return fmt.Errorf("%s: %v is not a whole number; write one such as %d", key, x, exampleInt(key))
			}
			// .inf and 1e20 are whole, but the conversion to int would
			// wrap them to a number nobody wrote. 2^63 itself is out.
			if f < math.MinInt64 || f >= -math.MinInt64 {
				return fmt.Errorf("%s: %v is not a whole number an int holds; write one such as %d", key, x, exampleInt(key))
			}
		}
	}
	return nil
}

// exampleInt is a plausible value for an integer key: its default.
func exampleInt(key string) int64 {
	d := reflect.ValueOf(createDefaultConfig()).Elem()
	t := d.Type()
	for i := range t.NumField() {
		if t.Field(i).Tag.Get("mapstructure") == key {
			return d.Field(i).Int()
		}
	}
	return 1
}

// quoteRaw writes a raw value as the user wrote it: text in quotes.
func quoteRaw(v any) string {
	if s, ok := v.(string); ok {
		return strconv.Quote(s)
	}
	return fmt.Sprint(v)
}

func isBool(v any) bool {
	_, ok := v.(bool)
	return ok
}

// isEmptyValue reports whether a raw value is nothing: null (what the env
// provider yields for an unset variable) or "".
func isEmptyValue(v any) bool {
	s, isString := v.(string)
	return v == nil || isString && s == ""
}

// isNumber reports whether a raw configuration value is a YAML number.
func isNumber(v any) bool {
	switch v.(type) {
	case int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64, float32, float64:
		return true
	}
	return false
}
