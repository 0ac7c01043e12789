package queue

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Constraints (seed 001): a named limit on the jobs a matcher selects. A constraint's key
// template splits the matched jobs by key (a tenant, a customer): each key gets the whole limit.
// Limits are a concurrency (at most N of a key's jobs ASSIGNED or RUNNING at once, across every
// worker and replica) and a rate (at most N starts per interval, a token bucket of Burst). A job
// over a limit stays PENDING, not failed and not counted as an attempt, until the limit allows it;
// jobs of other keys and queues are dispatched past it.
//
// The rules are here, once: which jobs a constraint selects (Matches), their key (Key), and whether
// a start is allowed now (Limiter). The stores only gather what the limiter reads — the jobs
// running per key, the rate buckets — and write what it decided, in the claim's transaction.

// Bounds of a constraint's settings.
const (
	MaxConstraints        = 100       // per server: every constrained claim reads them all
	MaxConstraintLimit    = 1_000_000 // concurrency, rate and burst
	MaxConstraintLabels   = 16
	MaxConstraintKeyLen   = 200 // bytes of a computed key; longer keys are cut (see KeyTemplate.Key)
	MaxKeyTemplateLen     = 512
	MinRateInterval       = time.Millisecond
	MaxRateInterval       = 24 * time.Hour
	MaxConstraintTypeGlob = 256
)

// Constraint is a named limit on the jobs its matcher selects.
type Constraint struct {
	Name  string
	Match JobMatcher
	// Key is the key template (ParseKeyTemplate): one limit per distinct key. "": one limit for all
	// the jobs the constraint matches.
	Key string
	// Concurrency: at most this many matched jobs of one key ASSIGNED or RUNNING at once. 0: none.
	Concurrency int
	// Rate: at most Rate.Limit starts of one key per Rate.Interval. Zero: none.
	Rate      RateLimit
	CreatedAt time.Time
	UpdatedAt time.Time
}

// JobMatcher selects jobs. Every condition set must hold; the zero matcher selects every job.
type JobMatcher struct {
	Queue  string            // the queue's name; "": any queue
	Type   string            // the job type, exact or a glob (path.Match: * ? [a-z]); "": any type
	Labels map[string]string // every label equal; none: any labels
}

// RateLimit is a token bucket: Limit tokens per Interval, at most Burst kept. The zero value is no
// rate limit.
type RateLimit struct {
	Limit    int
	Interval time.Duration
	Burst    int // 0: Limit
}

// IsZero reports whether there is no rate limit.
func (r RateLimit) IsZero() bool { return r.Limit == 0 }

// BucketSize is how many starts the bucket holds when full.
func (r RateLimit) BucketSize() int {
	if r.Burst > 0 {
		return r.Burst
	}
	return r.Limit
}

// perSecond is the refill rate.
func (r RateLimit) perSecond() float64 { return float64(r.Limit) / r.Interval.Seconds() }

// TokenTime is how long the bucket takes to gain one token: a bucket written longer ago holds at
// least one, so a claim only needs to read the buckets written since, to know which keys are out
// of tokens.
func (r RateLimit) TokenTime() time.Duration {
	if r.IsZero() {
		return 0
	}
	return time.Duration(float64(time.Second) / r.perSecond())
}

// Refill is how long an empty bucket takes to fill: a bucket last touched longer ago is full, and
// its state need not be kept.
func (r RateLimit) Refill() time.Duration {
	if r.IsZero() {
		return 0
	}
	return time.Duration(float64(r.BucketSize()) / r.perSecond() * float64(time.Second))
}

// String is the rate as ParseRate reads it back: "100/1m0s", with ",burst=N" when set.
func (r RateLimit) String() string {
	if r.IsZero() {
		return ""
	}
	s := strconv.Itoa(r.Limit) + "/" + formatInterval(r.Interval)
	if r.Burst > 0 {
		s += ",burst=" + strconv.Itoa(r.Burst)
	}
	return s
}

func formatInterval(d time.Duration) string {
	switch d {
	case time.Second:
		return "s"
	case time.Minute:
		return "m"
	case time.Hour:
		return "h"
	case 24 * time.Hour:
		return "d"
	}
	return d.String()
}

var rateRE = regexp.MustCompile(`^(\d+)/([0-9a-zµ.]+)(?:,burst=(\d+))?$`)

// ParseRate reads a rate: "N/s", "N/m", "N/h", "N/d" or N/<duration> ("100/10s"), optionally
// followed by ",burst=B" (the bucket's size; default N).
func ParseRate(s string) (RateLimit, error) {
	m := rateRE.FindStringSubmatch(strings.ReplaceAll(s, " ", ""))
	if m == nil {
		return RateLimit{}, fmt.Errorf("%w: rate %s: want N/s, N/m, N/h, N/d or N/<duration>, optionally ,burst=B", ErrInvalidArgument, Excerpt(s))
	}
	// The errors of strconv and time quote their whole input: name the part, quote only the excerpt.
	n, err := strconv.Atoi(m[1])
	if err != nil {
		return RateLimit{}, fmt.Errorf("%w: rate %s: limit out of range", ErrInvalidArgument, Excerpt(s))
	}
	var d time.Duration
	switch m[2] {
	case "s":
		d = time.Second
	case "m":
		d = time.Minute
	case "h":
		d = time.Hour
	case "d":
		d = 24 * time.Hour
	default:
		if d, err = time.ParseDuration(m[2]); err != nil {
			return RateLimit{}, fmt.Errorf("%w: rate %s: interval: want a duration such as 10s or 1h30m", ErrInvalidArgument, Excerpt(s))
		}
	}
	r := RateLimit{Limit: n, Interval: d}
	if m[3] != "" {
		if r.Burst, err = strconv.Atoi(m[3]); err != nil {
			return RateLimit{}, fmt.Errorf("%w: rate %s: burst out of range", ErrInvalidArgument, Excerpt(s))
		}
	}
	return r, r.validate()
}

func (r RateLimit) validate() error {
	if r.IsZero() && r.Interval == 0 && r.Burst == 0 {
		return nil
	}
	switch {
	case r.Limit < 1 || r.Limit > MaxConstraintLimit:
		return fmt.Errorf("%w: rate limit %d must be within 1..%d", ErrInvalidArgument, r.Limit, MaxConstraintLimit)
	case r.Interval < MinRateInterval || r.Interval > MaxRateInterval:
		return fmt.Errorf("%w: rate interval %s must be within %s..%s", ErrInvalidArgument, r.Interval, MinRateInterval, MaxRateInterval)
	case r.Interval%time.Millisecond != 0:
		return fmt.Errorf("%w: rate interval %s must be a whole number of milliseconds (the stores keep milliseconds)", ErrInvalidArgument, r.Interval)
	case r.Burst < 0 || r.Burst > MaxConstraintLimit:
		return fmt.Errorf("%w: rate burst %d must be within 0..%d", ErrInvalidArgument, r.Burst, MaxConstraintLimit)
	}
	return nil
}

var constraintNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,63}$`)

// Validate checks a constraint as submitted: its name (a queue name's alphabet: it is a metric
// label), its matcher, its key template, and at least one limit within bounds. The errors do not
// repeat the constraint's name: whoever asks named it.
func (c *Constraint) Validate() error {
	if !constraintNameRE.MatchString(c.Name) {
		return fmt.Errorf("%w: constraint name %s must match %s", ErrInvalidArgument, Excerpt(c.Name), constraintNameRE)
	}
	if c.Match.Queue != "" {
		if err := ValidateQueueName(c.Match.Queue); err != nil {
			return fmt.Errorf("match: %w", err)
		}
	}
	if len(c.Match.Type) > MaxConstraintTypeGlob || !utf8.ValidString(c.Match.Type) {
		return fmt.Errorf("%w: type pattern must be valid UTF-8 of at most %d bytes", ErrInvalidArgument, MaxConstraintTypeGlob)
	}
	if _, err := path.Match(c.Match.Type, ""); err != nil {
		return fmt.Errorf("%w: type pattern %s: %w: give a glob such as email.* or report.?", ErrInvalidArgument, Excerpt(c.Match.Type), err)
	}
	if len(c.Match.Labels) > MaxConstraintLabels {
		return fmt.Errorf("%w: at most %d labels", ErrInvalidArgument, MaxConstraintLabels)
	}
	for k, v := range c.Match.Labels {
		if k == "" || !utf8.ValidString(k) || !utf8.ValidString(v) || len(k) > 256 || len(v) > 1024 {
			return fmt.Errorf("%w: label %s: names 1..256 and values up to 1024 bytes of valid UTF-8", ErrInvalidArgument, Excerpt(k))
		}
	}
	if _, err := ParseKeyTemplate(c.Key); err != nil {
		return err
	}
	if c.Concurrency < 0 || c.Concurrency > MaxConstraintLimit {
		return fmt.Errorf("%w: concurrency %d must be within 0..%d", ErrInvalidArgument, c.Concurrency, MaxConstraintLimit)
	}
	if err := c.Rate.validate(); err != nil {
		return err
	}
	if c.Concurrency == 0 && c.Rate.IsZero() {
		return fmt.Errorf("%w: no limit set: give a concurrency, a rate or both", ErrInvalidArgument)
	}
	return nil
}

// AppliesTo reports whether the constraint may select jobs of queue q.
func (c *Constraint) AppliesTo(q string) bool { return c.Match.Queue == "" || c.Match.Queue == q }

// Matches reports whether the constraint selects the job (its queue, type and labels).
func (c *Constraint) Matches(j *Job) bool {
	if !c.AppliesTo(j.Queue) {
		return false
	}
	if c.Match.Type != "" && c.Match.Type != j.Type {
		if ok, _ := path.Match(c.Match.Type, j.Type); !ok {
			return false
		}
	}
	for k, v := range c.Match.Labels {
		if got, ok := j.Labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// String describes the constraint on one line: "email-per-tenant: type=email key={{.labels.tenant}}
// concurrency=5 rate=100/m".
func (c *Constraint) String() string {
	var b strings.Builder
	b.WriteString(c.Name + ":")
	if c.Match.Queue != "" {
		b.WriteString(" queue=" + c.Match.Queue)
	}
	if c.Match.Type != "" {
		b.WriteString(" type=" + c.Match.Type)
	}
	for _, k := range slices.Sorted(maps.Keys(c.Match.Labels)) {
		b.WriteString(" label:" + k + "=" + c.Match.Labels[k])
	}
	if c.Key != "" {
		b.WriteString(" key=" + c.Key)
	}
	if c.Concurrency > 0 {
		b.WriteString(" concurrency=" + strconv.Itoa(c.Concurrency))
	}
	if !c.Rate.IsZero() {
		b.WriteString(" rate=" + c.Rate.String())
	}
	return b.String()
}

// KeyTemplate computes a job's key for a constraint: literal text and fields, {{.labels.NAME}} (a
// label's value) and {{.payload.PATH}} (a field of a JSON object payload, PATH dot-separated for
// nested objects: {{.payload.customer.id}}). A missing label or field, or a payload that is not a
// JSON object, gives "". A string field is its value; any other JSON value its JSON text.
type KeyTemplate struct {
	parts        []keyPart
	needsPayload bool
}

type keyPart struct {
	literal string
	label   string   // {{.labels.NAME}}
	payload []string // {{.payload.A.B}}
}

var keyFieldRE = regexp.MustCompile(`^\.(labels|payload)((?:\.[A-Za-z0-9_-]+)+)$`)

// ParseKeyTemplate parses a key template; "" is the template of the single key "".
func ParseKeyTemplate(s string) (KeyTemplate, error) {
	var t KeyTemplate
	if len(s) > MaxKeyTemplateLen || !utf8.ValidString(s) {
		return t, fmt.Errorf("%w: key template must be valid UTF-8 of at most %d bytes", ErrInvalidArgument, MaxKeyTemplateLen)
	}
	rest := s
	for rest != "" {
		open := strings.Index(rest, "{{")
		if open < 0 {
			if strings.Contains(rest, "}}") {
				return t, fmt.Errorf("%w: key template %s: unmatched }}", ErrInvalidArgument, Excerpt(s))
			}
			t.parts = append(t.parts, keyPart{literal: rest})
			break
		}
		if open > 0 {
			if strings.Contains(rest[:open], "}}") {
				return t, fmt.Errorf("%w: key template %s: unmatched }}", ErrInvalidArgument, Excerpt(s))
			}
			t.parts = append(t.parts, keyPart{literal: rest[:open]})
		}
		end := strings.Index(rest[open:], "}}")
		if end < 0 {
			return t, fmt.Errorf("%w: key template %s: unclosed {{", ErrInvalidArgument, Excerpt(s))
		}
		field := strings.TrimSpace(rest[open+2 : open+end])
		m := keyFieldRE.FindStringSubmatch(field)
		if m == nil {
			return t, fmt.Errorf("%w: key template %s: field %s: want {{.labels.NAME}} or {{.payload.PATH}}", ErrInvalidArgument, Excerpt(s), Excerpt(field))
		}
		names := strings.Split(m[2][1:], ".")
		if m[1] == "labels" {
			if len(names) != 1 {
				return t, fmt.Errorf("%w: key template %s: a label has no fields: %s", ErrInvalidArgument, Excerpt(s), Excerpt(field))
			}
			t.parts = append(t.parts, keyPart{label: names[0]})
		} else {
			t.parts = append(t.parts, keyPart{payload: names})
			t.needsPayload = true
		}
		rest = rest[open+end+2:]
	}
	return t, nil
}

// NeedsPayload reports whether the key reads the payload.
func (t KeyTemplate) NeedsPayload() bool { return t.needsPayload }

// Key is the job's key: at most MaxConstraintKeyLen bytes (a longer one is cut at a character
// boundary).
func (t KeyTemplate) Key(j *Job) string {
	var b strings.Builder
	var obj map[string]any
	decoded := false
	for _, p := range t.parts {
		switch {
		case p.payload != nil:
			if !decoded {
				decoded = true
				obj = payloadObject(j.Payload)
			}
			b.WriteString(payloadField(obj, p.payload))
		case p.label != "":
			b.WriteString(j.Labels[p.label])
		default:
			b.WriteString(p.literal)
		}
	}
	return cutUTF8(strings.ReplaceAll(b.String(), EntrySeparator, "\uFFFD"), MaxConstraintKeyLen)
}

// EntrySeparator separates a job's entries where a store passes them as one string (an ASCII
// record separator); a key never holds one: KeyTemplate.Key replaces it with U+FFFD.
const EntrySeparator = "\x1e"

func payloadObject(p []byte) map[string]any {
	var obj map[string]any
	if len(p) == 0 || p[0] != '{' && !json.Valid(p) {
		return nil
	}
	// Numbers stay their JSON text: as float64, ids above 2^53 would share one key.
	dec := json.NewDecoder(bytes.NewReader(p))
	dec.UseNumber()
	if dec.Decode(&obj) != nil {
		return nil
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil // trailing data: not one JSON object
	}
	return obj
}

func payloadField(obj map[string]any, path []string) string {
	var v any = obj
	for _, name := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return ""
		}
		if v, ok = m[name]; !ok {
			return ""
		}
	}
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	default:
		b, _ := json.Marshal(x)
		return string(b)
	}
}

func cutUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// LimitEntry is one (constraint, key) a job counts against, as the stores keep it on the job:
// "NAME:KEY" (a constraint's name has no colon).
func LimitEntry(constraint, key string) string { return constraint + ":" + key }

// SplitLimitEntry reverses LimitEntry.
func SplitLimitEntry(e string) (constraint, key string) {
	constraint, key, _ = strings.Cut(e, ":")
	return constraint, key
}

// Bucket is a rate limit's token bucket for one key, as stored: Tokens at At. A key without a
// stored bucket has a full one.
type Bucket struct {
	Tokens float64
	At     time.Time
}

// tokens is the bucket's content at now.
func (b Bucket) tokens(r RateLimit, now time.Time) float64 {
	size := float64(r.BucketSize())
	if b.At.IsZero() {
		return size
	}
	return math.Min(size, b.Tokens+max(now.Sub(b.At).Seconds(), 0)*r.perSecond())
}

// ConstraintSet is the constraints in force, read together (the stores read them with the claim's
// lock, so a claim never mixes two versions). Gen numbers the version: every create, replace and
// delete increments it, and the keys stored on jobs carry the Gen they were computed at, so a key
// from an older version is computed again.
type ConstraintSet struct {
	Gen         int64
	Constraints []*Constraint // by name
}

// For returns the constraints that may select jobs of queue q, by name.
func (s *ConstraintSet) For(q string) []*Constraint {
	var out []*Constraint
	for _, c := range s.Constraints {
		if c.AppliesTo(q) {
			out = append(out, c)
		}
	}
	return out
}

// Constrains reports whether a constraint of the set may select jobs of queue q (For(q) is not
// empty), without building the list.
func (s *ConstraintSet) Constrains(q string) bool {
	return slices.ContainsFunc(s.Constraints, func(c *Constraint) bool { return c.AppliesTo(q) })
}

// NeedsPayload reports whether a key of these constraints reads the payload.
func NeedsPayload(cs []*Constraint) bool {
	for _, c := range cs {
		if t, err := ParseKeyTemplate(c.Key); err == nil && t.NeedsPayload() {
			return true
		}
	}
	return false
}

// Keyer computes jobs' entries under a list of constraints, each key template parsed once. It is
// safe for concurrent use.
type Keyer struct {
	cs   []*Constraint
	tmpl []KeyTemplate
}

// NewKeyer returns the keyer of the constraints cs (stored ones: their templates are valid).
func NewKeyer(cs []*Constraint) *Keyer {
	k := &Keyer{cs: cs, tmpl: make([]KeyTemplate, len(cs))}
	for i, c := range cs {
		k.tmpl[i], _ = ParseKeyTemplate(c.Key) // validated when stored
	}
	return k
}

// Entries returns the entries job j counts against: one per constraint that matches it, sorted;
// nil when none does.
func (k *Keyer) Entries(j *Job) []string {
	var out []string
	for i, c := range k.cs {
		if c.Matches(j) {
			out = append(out, LimitEntry(c.Name, k.tmpl[i].Key(j)))
		}
	}
	slices.Sort(out)
	return out
}

// Limiter decides, for one claim, which candidate jobs may start now. It is built from the
// constraints that apply to the claim's queue, the jobs running per entry (LimitEntry) and the
// stored rate buckets, all read under the claim's lock, at the store's time now; the store feeds
// it the candidates in dispatch order and writes back what it decided. Not safe for concurrent use.
type Limiter struct {
	now       time.Time
	cons      map[string]*Constraint
	keyer     *Keyer
	running   map[string]int
	buckets   map[string]Bucket // read, refilled lazily to now
	loaded    map[string]bool   // entries whose bucket Load read (none stored: full)
	taken     map[string]bool   // buckets that gave tokens in this claim
	blocked   map[string]bool
	throttled map[string]int
	retryAt   time.Time
}

// NewLimiter returns the limiter of a claim. running counts the ASSIGNED and RUNNING jobs of each
// entry; buckets holds the stored rate buckets by entry (missing: full).
func NewLimiter(cs []*Constraint, running map[string]int, buckets map[string]Bucket, now time.Time) *Limiter {
	l := &Limiter{
		now: now, cons: map[string]*Constraint{}, keyer: NewKeyer(cs),
		running: running, buckets: buckets, loaded: map[string]bool{}, taken: map[string]bool{}, blocked: map[string]bool{},
		throttled: map[string]int{},
	}
	if l.running == nil {
		l.running = map[string]int{}
	}
	if l.buckets == nil {
		l.buckets = map[string]Bucket{}
	}
	for _, c := range cs {
		l.cons[c.Name] = c
	}
	for e, n := range l.running {
		if c := l.cons[entryConstraint(e)]; c != nil && c.Concurrency > 0 && n >= c.Concurrency {
			l.blocked[e] = true
		}
	}
	for e := range l.buckets {
		if c := l.cons[entryConstraint(e)]; c != nil && !c.Rate.IsZero() && l.tokens(c, e) < 1 {
			l.blocked[e] = true
			l.noteRetry(c, e)
		}
	}
	return l
}

func entryConstraint(e string) string { name, _ := SplitLimitEntry(e); return name }

// Unread returns the entries of entries with a rate limit whose bucket the limiter has neither been
// given nor loaded. A claim that gave NewLimiter only the buckets that may be out of tokens (those
// written within TokenTime) reads these, and Loads them, before Admit decides a job of theirs.
func (l *Limiter) Unread(entries []string) []string {
	var out []string
	for _, e := range entries {
		c := l.cons[entryConstraint(e)]
		if c == nil || c.Rate.IsZero() || l.loaded[e] {
			continue
		}
		if _, ok := l.buckets[e]; ok {
			continue
		}
		out = append(out, e)
	}
	return out
}

// Load adds the stored buckets of the entries asked (read for Unread's entries; one not in buckets
// has none stored: it is full).
func (l *Limiter) Load(asked []string, buckets map[string]Bucket) {
	for _, e := range asked {
		l.loaded[e] = true
		b, ok := buckets[e]
		if !ok {
			continue
		}
		l.buckets[e] = b
		if c := l.cons[entryConstraint(e)]; c != nil && !c.Rate.IsZero() && l.tokens(c, e) < 1 {
			l.blocked[e] = true
			l.noteRetry(c, e)
		}
	}
}

// Entries returns the entries the job counts against (Keyer.Entries).
func (l *Limiter) Entries(j *Job) []string { return l.keyer.Entries(j) }

func (l *Limiter) tokens(c *Constraint, e string) float64 {
	b := l.buckets[e]
	return b.tokens(c.Rate, l.now)
}

func (l *Limiter) noteRetry(c *Constraint, e string) {
	// The first nanosecond at which the bucket holds a token, so that a claim woken then admits
	// and one woken earlier would not: rounded up, then corrected by the float error of tokens (a
	// few nanoseconds at most). A bucket stored by a clock ahead of ours fills from its At.
	b, from := l.buckets[e], l.now
	if b.At.After(from) {
		from = b.At
	}
	need := 1 - b.tokens(c.Rate, from)
	at := from.Add(time.Duration(math.Ceil(need / c.Rate.perSecond() * float64(time.Second))))
	for i := 0; i < 8 && b.tokens(c.Rate, at) < 1; i++ {
		at = at.Add(time.Nanosecond)
	}
	for i := 0; i < 8 && at.After(from) && b.tokens(c.Rate, at.Add(-time.Nanosecond)) >= 1; i++ {
		at = at.Add(-time.Nanosecond)
	}
	if l.retryAt.IsZero() || at.Before(l.retryAt) {
		l.retryAt = at
	}
}

// Admit decides one candidate whose entries are these (from Entries, or as stored with the job):
// it may start when every entry of a current constraint has a concurrency slot and a rate token
// free; then it takes them and Admit returns true. Otherwise nothing is taken, the job counts as
// throttled for the first constraint that held it, and the entries now at their limit are blocked
// (Blocked), so the store skips their other jobs. Entries of constraints no longer in force are
// ignored.
func (l *Limiter) Admit(entries []string) bool {
	held := ""
	for _, e := range entries {
		c := l.cons[entryConstraint(e)]
		if c == nil {
			continue
		}
		if c.Concurrency > 0 && l.running[e] >= c.Concurrency {
			l.blocked[e] = true
			held = c.Name
			break
		}
		if !c.Rate.IsZero() && l.tokens(c, e) < 1 {
			l.blocked[e] = true
			l.noteRetry(c, e)
			held = c.Name
			break
		}
	}
	if held != "" {
		l.throttled[held]++
		return false
	}
	for _, e := range entries {
		c := l.cons[entryConstraint(e)]
		if c == nil {
			continue
		}
		if c.Concurrency > 0 {
			l.running[e]++
			if l.running[e] >= c.Concurrency {
				l.blocked[e] = true
			}
		}
		if !c.Rate.IsZero() {
			l.buckets[e] = Bucket{Tokens: l.tokens(c, e) - 1, At: l.now}
			l.taken[e] = true
			if l.tokens(c, e) < 1 {
				l.blocked[e] = true
				l.noteRetry(c, e)
			}
		}
	}
	return true
}

// Blocked returns the entries at their limit, sorted: no job counting against one may start now.
func (l *Limiter) Blocked() []string { return slices.Sorted(maps.Keys(l.blocked)) }

// Buckets returns the rate buckets this claim took tokens from, to store (At is the claim's now).
func (l *Limiter) Buckets() map[string]Bucket {
	out := make(map[string]Bucket, len(l.taken))
	for e := range l.taken {
		out[e] = l.buckets[e]
	}
	return out
}

// Throttled counts, per constraint, the candidates it held back in this claim.
func (l *Limiter) Throttled() map[string]int { return l.throttled }

// RetryAt is the earliest time a rate-limited entry met in this claim has a token again; zero when
// no rate limit held anything back. A concurrency limit frees with a report instead.
func (l *Limiter) RetryAt() time.Time { return l.retryAt }

// ConstraintKeyUsage is one key's current use of a constraint.
type ConstraintKeyUsage struct {
	Key     string
	Running int // jobs ASSIGNED or RUNNING
	// Tokens is the rate bucket's content now (a rate limit only; full for a key without a bucket).
	Tokens float64
}

// ConstraintUsage is a constraint's current use: the jobs running under it and its busiest keys.
type ConstraintUsage struct {
	Running int // jobs ASSIGNED or RUNNING under every key together
	// Keys counts the keys in use: with at least one such job, or (a rate) whose bucket started a
	// job within the rate's refill time.
	Keys int
	// Top: the keys asked for, then the busiest, most running first, then the keys whose rate
	// bucket is lowest (key order on ties).
	Top []ConstraintKeyUsage
}

// Describe says how the constraint holds a job of key key back, for job status: "limited by
// constraint email-per-tenant, key acme: 5/5 running", "…: rate 100/m, next start in 1.2s", or ""
// when it does not (now). ahead counts the key's due jobs that start before this one: under a
// rate each takes a token first, so the job's own start is ahead+1 tokens away ("next start in
// 3.6s, 2 jobs of the key before it").
func (c *Constraint) Describe(key string, u ConstraintKeyUsage, ahead int) string {
	k := key
	if c.Key == "" {
		k = "(all)"
	}
	if c.Concurrency > 0 && u.Running >= c.Concurrency {
		return fmt.Sprintf("limited by constraint %s, key %s: %d/%d running", c.Name, k, u.Running, c.Concurrency)
	}
	need := float64(ahead + 1)
	if c.Rate.IsZero() || u.Tokens >= need {
		return ""
	}
	wait := time.Duration((need - u.Tokens) / c.Rate.perSecond() * float64(time.Second)).Round(time.Millisecond)
	out := fmt.Sprintf("limited by constraint %s, key %s: rate %s, next start in %s", c.Name, k, c.Rate, wait)
	switch {
	case ahead == 1:
		out += ", 1 job of the key before it"
	case ahead > 1:
		out += fmt.Sprintf(", %d jobs of the key before it", ahead)
	}
	return out
}

// StartsBefore reports whether due job a starts before due job b when both wait for the same
// constraint key: higher priority first, then the one due first (then by id): the order a
// constrained claim meets them in, aging and weights aside.
func StartsBefore(a, b *Job) bool {
	if a.Priority != b.Priority {
		return a.Priority > b.Priority
	}
	if c := a.DueAt().Compare(b.DueAt()); c != 0 {
		return c < 0
	}
	return a.ID < b.ID
}

// TokensNow is a stored bucket's content at now under rate r (full without one).
func TokensNow(r RateLimit, b Bucket, now time.Time) float64 { return b.tokens(r, now) }
