package wsconn

// MaxLingering is maxLingering, for tests.
const MaxLingering = maxLingering

// Lingering returns how many sockets are being read past.
func Lingering() int64 { return lingering.Load() }

// SetLingering sets that count, as if n sockets were being read past.
func SetLingering(n int64) { lingering.Store(n) }

// LentReadBuffers returns how many read buffers are lent now.
func LentReadBuffers() int64 { return lent.Load() }
