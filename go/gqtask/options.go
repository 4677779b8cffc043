package gqtask

import (
	"fmt"
	"math"
	"time"
)

// Options are the envelope's opts: what gq's worker enforces for this job. Zero values
// are left out of the envelope, so gq falls back to the task's or the worker's defaults.
// The key names are gq's (gq/tasks/envelope.py).
type Options struct {
	// Retries ("retries"): how many times a failing job runs again (at most Retries+1
	// runs). A pointer because 0 (never retry) differs from unset: use RetriesOf(n).
	Retries *int
	// Timeout ("timeout", float seconds): the limit of one run.
	Timeout time.Duration
	// Backoff ("backoff", float seconds): the cap of the retry delay.
	Backoff time.Duration
	// Expires ("expires", absolute unix seconds): a job not started by then goes to dead.
	Expires time.Time
	// Unique ("unique"): the uniqueness lock the job releases when it finishes.
	Unique string
	// ResultTTL ("result_ttl", float seconds): how long gq keeps the job's result.
	ResultTTL time.Duration
	// Group ("group"): the group (tenant) whose limits and turns the job takes.
	Group string
	// Extra: keys this package does not know, kept as they came (a newer producer's).
	Extra map[string]interface{}
}

// RetriesOf returns a pointer to n, for Options.Retries.
func RetriesOf(n int) *int { return &n }

func (o Options) toMap() map[string]interface{} {
	m := map[string]interface{}{}
	for key, value := range o.Extra {
		m[key] = value
	}
	if o.Retries != nil {
		m["retries"] = int64(*o.Retries)
	}
	putSeconds(m, "timeout", o.Timeout)
	putSeconds(m, "backoff", o.Backoff)
	putSeconds(m, "result_ttl", o.ResultTTL)
	if !o.Expires.IsZero() {
		m["expires"] = float64(o.Expires.UnixNano()) / 1e9
	}
	putString(m, "unique", o.Unique)
	putString(m, "group", o.Group)
	return m
}

func putSeconds(m map[string]interface{}, key string, d time.Duration) {
	if d > 0 {
		m[key] = seconds(d)
	}
}

func putString(m map[string]interface{}, key, s string) {
	if s != "" {
		m[key] = s
	}
}

func optionsOf(value interface{}) (Options, error) {
	var o Options
	if value == nil {
		return o, nil
	}
	raw, ok := value.(map[string]interface{})
	if !ok {
		return o, fmt.Errorf("opts is %T, not a map", value)
	}
	for key, v := range raw {
		if err := o.set(key, v); err != nil {
			return o, fmt.Errorf("opts[%q]: %v", key, err)
		}
	}
	return o, nil
}

func (o *Options) set(key string, v interface{}) (err error) {
	switch key {
	case "retries":
		var n int64
		n, err = integer(v)
		o.Retries = RetriesOf(int(n))
	case "timeout":
		o.Timeout, err = duration(v)
	case "backoff":
		o.Backoff, err = duration(v)
	case "result_ttl":
		o.ResultTTL, err = duration(v)
	case "expires":
		o.Expires, err = instant(v)
	case "unique":
		o.Unique, err = text(v)
	case "group":
		o.Group, err = text(v)
	default:
		if o.Extra == nil {
			o.Extra = map[string]interface{}{}
		}
		o.Extra[key] = v
	}
	return err
}

func number(v interface{}) (float64, error) {
	switch n := v.(type) {
	case int64:
		return float64(n), nil
	case uint64:
		return float64(n), nil
	case float64:
		return n, nil
	}
	return 0, fmt.Errorf("%#v is not a number", v)
}

func integer(v interface{}) (int64, error) {
	f, err := number(v)
	if err == nil && (f != math.Trunc(f) || f < 0) {
		err = fmt.Errorf("%#v is not an integer >= 0", v)
	}
	return int64(f), err
}

func duration(v interface{}) (time.Duration, error) {
	f, err := number(v)
	return time.Duration(f * float64(time.Second)), err
}

func instant(v interface{}) (time.Time, error) {
	f, err := number(v)
	whole, frac := math.Modf(f)
	return time.Unix(int64(whole), int64(frac*1e9)).UTC(), err
}

func text(v interface{}) (string, error) {
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("%#v is not a string", v)
	}
	return s, nil
}
