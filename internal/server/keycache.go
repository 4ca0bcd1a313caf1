package server

import (
	"sync"
	"time"

	"github.com/oncepush/oncepush/driver/serverstore"
)

// KeyCacheTTLDefault is how long a looked-up API key is trusted without
// reading it again: the longest a revoked key keeps working in a running
// server. Each request would otherwise cost a database round trip.
const KeyCacheTTLDefault = time.Second

// keyCacheMax bounds the cache; past it the cache starts over.
const keyCacheMax = 10000

// keyCache remembers API key rows (found or not) by hash for a short time.
type keyCache struct {
	ttl time.Duration
	mu  sync.Mutex
	m   map[string]cachedKey
}

type cachedKey struct {
	row *serverstore.APIKey // nil: no such key
	at  time.Time
}

func (c *keyCache) get(hash []byte) (*serverstore.APIKey, bool) {
	if c.ttl <= 0 {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[string(hash)]
	if !ok || time.Since(e.at) > c.ttl {
		return nil, false
	}
	return e.row, true
}

func (c *keyCache) put(hash []byte, row *serverstore.APIKey) {
	if c.ttl <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= keyCacheMax {
		c.m = make(map[string]cachedKey)
	}
	c.m[string(hash)] = cachedKey{row: row, at: time.Now()}
}
