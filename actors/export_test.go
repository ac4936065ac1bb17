package actors

// SetMaxWatermarkWindow lets tests use a small window; it returns a restore.
func SetMaxWatermarkWindow(n int64) func() {
	old := maxWatermarkWindow
	maxWatermarkWindow = n
	return func() { maxWatermarkWindow = old }
}
