package schedule

// ParseCron is parseCron, for the tests of package schedule_test.
var ParseCron = parseCron
