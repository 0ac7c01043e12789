package admin

// Run is not implemented yet: following lifecycle events arrives with the
// Kafka events issue.
func (c *EventsTailCmd) Run(*runEnv) error { return notImplemented("events tail") }
