// Package config loads and validates the configuration of turbo, the
// parallel Kafka consumer started by `turbo run --config app.yaml`.
//
// The file is YAML, JSON or TOML, chosen by its extension (.yaml, .yml,
// .json, .toml). Its schema, with defaults:
//
//	kafka:
//	  brokers: ["127.0.0.1:9092"]   # host:port, at most 100; ["embedded"] (lower case)
//	                                # starts an in-memory broker in this process
//	  client_id: turbo
//	  version: "3.6.0"              # Kafka protocol version, at least 2.4.0
//	  group_instance_id: ""         # static membership when set, [0-9a-zA-Z._-]{1,240}
//	  embedded:                     # only used when brokers is ["embedded"]
//	    partitions: 8               # partitions of auto-created topics, 1..1000
//	    seed:                       # demo records written at start
//	      topic: ""                 # a topic name; required when records > 0
//	      records: 0                # 0..100000; 0 means no seeding
//	      keys: 100                 # distinct keys, 1..100000 when records > 0
//	consumers:                      # 1 to 256; each is one actor tree
//	  - name: orders                # required, unique, [0-9a-zA-Z._-]+
//	    group: ""                   # consumer group, defaults to name
//	    topics: [orders]            # 1 to 1000 Kafka topic names [a-zA-Z0-9._-]{1,249}, or /regex/ patterns
//	    initial_offset: oldest      # oldest | newest
//	    ordering: key               # key | partition | unordered
//	    concurrency: 16             # 1..10000
//	    max_buffered: 20000         # 0..100000; a ceiling: about a second of work is read ahead
//	    max_buffered_bytes: 64MiB   # bytes of the records fetched and not finished
//	                                # (keys, values, headers), 1MiB..16GiB
//	    commit_interval: 1s         # 10ms..24h
//	    metadata_refresh: 1m        # 100ms..24h: how soon a new topic matching a /pattern/ is read
//	    exclude_topics: []          # never read, even when a /pattern/ of topics matches
//	    handler:
//	      type: noop                # http | grpc | noop | log | sleep | hash (required)
//	      url: ""                   # http: required absolute http(s) URL with a host
//	      timeout: 10s              # http: 1ms..24h
//	      duration: 0s              # sleep: simulated work per record, 0..24h
//	      bytes: 0                  # hash: bytes SHA-256 hashes per record, 1..2^30
//	    retry:                      # keys left out keep their defaults
//	      max_attempts: 3           # attempts in all, 1..1000000; 1 means no retry
//	      initial_backoff: 100ms    # 1ms..24h; doubles per attempt, with jitter
//	      max_backoff: 10s          # initial_backoff..24h
//	    on_failure: fail            # fail | skip | dlq: when the attempts run out,
//	                                # or at once on a permanent error
//	    dlq_topic: ""               # dlq: required, a Kafka topic name [a-zA-Z0-9._-]{1,249}
//	    max_handler_time: 0s        # 0 (unlimited) or 1ms..24h; a longer attempt is
//	                                # cancelled and counts as failed
//	    commit_metadata_bytes: 4000 # budget for the finished offsets recorded in
//	                                # the commit metadata; 0 = off, else 64..4096
//	    rate:
//	      limit: 0                  # attempts started per second; 0 = no limit, else 0.01..10000000
//	      burst: 0                  # attempts at once after a quiet spell; 0 = limit/10 (at least 1), ..100000
//	    # handler.encoding (http): base64 (default) | utf8 — keys and values in a batch body
//	    # handler.tls (http, https:// only): ca_file, cert_file + key_file (mTLS), server_name,
//	    #   insecure_skip_verify; HTTP/2 when the server offers it
//	    concurrency_mode: fixed     # fixed | adaptive: the limit follows the downstream's
//	                                # push-back (429, 503, ErrBackpressure) and latency
//	    concurrency_min: 0          # adaptive: where the limit starts and its floor; 0 = 1, ..concurrency
//	    batch:
//	      max_records: 1            # records per handler call (HandleBatch, one http request), 1..10000, <= concurrency + max_buffered
//	      max_wait: 0s              # how long records wait for a batch to fill; 0 = not at all, else 1ms..10s
//	      max_bytes: 0              # bound on a call's keys and values; 0 = none, else up to 16GiB
//	shutdown_timeout: 30s           # 1s..1h
//	log:
//	  level: info                   # debug | info | warn | error
//	  format: console               # console | json
//
// The swarm section (`turbo swarm`) is described in swarm.go; every bound is
// in limits.go, in the "Limits" table of config/README.md and in the
// generated config/REFERENCE.md.
//
// The file is at most 16 MiB. Decoding is strict: keys are case-sensitive,
// unknown keys are errors, a key given twice is an error (in JSON too), a
// second YAML document is an error, and so are values of the wrong type:
// text that the file's syntax reads as a number or a boolean must be quoted
// (group: 0123 is an error, since YAML reads it as 83; write "0123"), and a
// quoted number is not an integer (concurrency: "4" is an error); durations must be
// Go duration strings with a unit ("1s", "500ms"); a bare number is rejected
// because "5" could mean seconds or nanoseconds. A key set to null is
// treated as absent, so its default applies; a section given in part (say
// retry with only max_attempts) keeps the defaults of the keys it leaves out.
//
// Environment variables override the file. Their names are TURBO_ followed
// by the key path in upper case with "_" between the parts and list indices
// as numbers: TURBO_KAFKA_BROKERS, TURBO_SHUTDOWN_TIMEOUT,
// TURBO_CONSUMERS_0_HANDLER_URL, TURBO_CONSUMERS_0_RETRY_MAX_ATTEMPTS,
// TURBO_CONSUMERS_0_ON_FAILURE. Lists (brokers, topics) are comma-separated.
// Only consumers present in the file can be overridden, and an empty value
// counts as unset, as in viper. A variable whose name starts with TURBO_
// and the first word of a top-level key (TURBO_KAFKA_, TURBO_CONSUMERS_,
// TURBO_SHUTDOWN_, TURBO_LOG_, TURBO_SWARM_, TURBO_HTTP_, TURBO_TRACING_)
// but names no key, such as TURBO_KAFKA_BROKER or
// TURBO_CONSUMERS_5_CONCURRENCY for a file with fewer consumers, is an
// error naming it. The variables turbo swarm gives its nodes begin with
// [EnvNodePrefix], outside that namespace.
//
// Every error from [Load], [Config.Validate] and [Config.Select] wraps
// [ErrInvalid]; errors about one key are a [*FieldError].
package config
