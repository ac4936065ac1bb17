package turbo.bench;

import io.confluent.parallelconsumer.ParallelConsumerOptions;
import io.confluent.parallelconsumer.ParallelConsumerOptions.CommitMode;
import io.confluent.parallelconsumer.ParallelConsumerOptions.ProcessingOrder;
import io.confluent.parallelconsumer.ParallelStreamProcessor;
import java.lang.management.ManagementFactory;
import java.time.Duration;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * The Confluent Parallel Consumer as one of turbo's benchmark peers
 * (test/bench): its {@link ParallelStreamProcessor} consumes a topic with the
 * given ordering and maxConcurrency, each record taking the given simulated
 * work, until the expected number of records was processed and the group's
 * committed offsets reached the end of every partition. Then it prints one
 * JSON line and exits 0 (1 when the processor fails, 2 on bad arguments).
 *
 * <p>Commits: {@code PERIODIC_CONSUMER_ASYNCHRONOUS} (the library's default and
 * its fastest mode) every {@code --commit-interval-ms}. Keys are Strings, so
 * KEY ordering groups byte-equal keys as turbo does (byte[] keys would compare
 * by identity).
 *
 * <p>With {@code --output-topic}, each record is also written there (key and
 * value) by {@code pollAndProduce} in the library's transactional mode
 * ({@code PERIODIC_TRANSACTIONAL_PRODUCER}: outputs and offsets committed in
 * one transaction every {@code --commit-interval-ms}), the Parallel
 * Consumer's exactly-once pipeline.
 *
 * <p>On SIGTERM (the benchmark stops it after a fixed window in the memory
 * scenario) it closes the processor without draining and prints the same JSON
 * line with what it processed so far.
 */
public final class PcBench {
    private static final String USAGE = String.join("\n",
            "usage: java -jar pc-bench.jar --brokers HOST:PORT[,..] --topic T --group G --records N",
            "                              [--ordering KEY|PARTITION|UNORDERED] [--concurrency 16]",
            "                              [--work-ms 0] [--commit-interval-ms 100] [--output-topic O]");

    private final Map<String, String> args;
    private final AtomicLong processed = new AtomicLong();
    private final CountDownLatch allProcessed = new CountDownLatch(1);
    private final AtomicBoolean reported = new AtomicBoolean();
    private final AtomicBoolean terminated = new AtomicBoolean();
    private volatile double firstAt = -1;
    private volatile double processedAt = -1;

    private PcBench(Map<String, String> args) {
        this.args = args;
    }

    public static void main(String[] argv) throws Exception {
        Map<String, String> args = parse(argv);
        if (args == null) {
            System.err.println(USAGE);
            System.exit(2);
        }
        System.exit(new PcBench(args).run());
    }

    /** Flags as "--name value" pairs; null when malformed or a required one is missing. */
    private static Map<String, String> parse(String[] argv) {
        Map<String, String> m = new HashMap<>(Map.of(
                "ordering", "KEY", "concurrency", "16", "work-ms", "0", "commit-interval-ms", "100"));
        if (argv.length % 2 != 0) {
            return null;
        }
        for (int i = 0; i < argv.length; i += 2) {
            if (!argv[i].startsWith("--")) {
                return null;
            }
            m.put(argv[i].substring(2), argv[i + 1]);
        }
        for (String required : List.of("brokers", "topic", "group", "records")) {
            if (!m.containsKey(required)) {
                return null;
            }
        }
        return m;
    }

    private int run() throws Exception {
        String brokers = args.get("brokers");
        String topic = args.get("topic");
        String group = args.get("group");
        long records = Long.parseLong(args.get("records"));
        long workMs = Long.parseLong(args.get("work-ms"));

        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, brokers);
        props.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false"); // the Parallel Consumer commits
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        KafkaConsumer<String, byte[]> consumer = new KafkaConsumer<>(props);

        String output = args.get("output-topic");
        var builder = ParallelConsumerOptions.<String, byte[]>builder()
                .consumer(consumer)
                .ordering(ProcessingOrder.valueOf(args.get("ordering").toUpperCase(Locale.ROOT)))
                .maxConcurrency(Integer.parseInt(args.get("concurrency")))
                .commitMode(CommitMode.PERIODIC_CONSUMER_ASYNCHRONOUS)
                .commitInterval(Duration.ofMillis(Long.parseLong(args.get("commit-interval-ms"))));
        if (output != null) {
            Properties pp = new Properties();
            pp.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, brokers);
            pp.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, "pc-bench-" + group);
            pp.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
            pp.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
            pp.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
            builder.producer(new KafkaProducer<String, byte[]>(pp)).commitMode(CommitMode.PERIODIC_TRANSACTIONAL_PRODUCER);
        }
        ParallelStreamProcessor<String, byte[]> pc = ParallelStreamProcessor.createEosStreamProcessor(builder.build());

        Thread onTerm = new Thread(() -> {
            terminated.set(true);
            pc.closeDontDrainFirst(Duration.ofSeconds(10));
            report(records, -1);
        });
        Runtime.getRuntime().addShutdownHook(onTerm);

        pc.subscribe(List.of(topic));
        if (output == null) {
            pc.poll(ctx -> handle(workMs, records));
        } else {
            pc.pollAndProduce(ctx -> {
                handle(workMs, records);
                return new ProducerRecord<>(output, ctx.key(), ctx.value());
            });
        }

        while (!allProcessed.await(100, TimeUnit.MILLISECONDS)) {
            if (terminated.get()) {
                return 0; // the shutdown hook closes pc and reports
            }
            if (pc.isClosedOrFailed()) {
                System.err.println("pc-bench: the parallel consumer stopped before processing every record");
                return 1;
            }
        }
        double committedAt = waitCommitted(brokers, group, topic);
        report(records, committedAt);
        try {
            Runtime.getRuntime().removeShutdownHook(onTerm);
        } catch (IllegalStateException alreadyStopping) {
            return 0; // SIGTERM came first (the benchmark saw the commit too): the hook closes pc
        }
        pc.close();
        return 0;
    }

    /** One record's work, counted. */
    private void handle(long workMs, long records) {
        if (workMs > 0) {
            try {
                Thread.sleep(workMs);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new RuntimeException(e);
            }
        }
        long n = processed.incrementAndGet();
        if (n == 1) {
            firstAt = sinceJvmStart();
        }
        if (n == records) {
            processedAt = sinceJvmStart();
            allProcessed.countDown();
        }
    }

    /**
     * Polls the group's committed offsets until they reach the end of every partition of topic. It asks
     * through a consumer of the same group that never subscribes (committed() and endOffsets() need no
     * membership), not through the Admin client: with kafka-clients 3.9, Admin.describeTopics fails
     * against kfake (the embedded broker leaves DescribeTopicPartitions' eligibleLeaderReplicas null).
     */
    private static double waitCommitted(String brokers, String group, String topic) throws Exception {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, brokers);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        try (KafkaConsumer<byte[], byte[]> observer = new KafkaConsumer<>(p)) {
            Set<TopicPartition> parts = new HashSet<>();
            observer.partitionsFor(topic).forEach(info -> parts.add(new TopicPartition(topic, info.partition())));
            Map<TopicPartition, Long> ends = observer.endOffsets(parts);
            while (true) {
                Map<TopicPartition, OffsetAndMetadata> committed = observer.committed(parts);
                boolean done = ends.entrySet().stream().allMatch(e -> e.getValue() == 0
                        || (committed.get(e.getKey()) != null && committed.get(e.getKey()).offset() >= e.getValue()));
                if (done) {
                    return sinceJvmStart();
                }
                Thread.sleep(20);
            }
        }
    }

    /** Prints the one JSON line, once (committedAt -1: stopped before everything was committed). */
    private void report(long records, double committedAt) {
        if (!reported.compareAndSet(false, true)) {
            return;
        }
        System.out.printf(Locale.ROOT,
                "{\"peer\":\"parallel-consumer\",\"version\":\"%s\",\"records\":%d,\"processed\":%d,"
                        + "\"first_s\":%.3f,\"processed_s\":%.3f,\"committed_s\":%.3f}%n",
                manifestVersion(), records, processed.get(), firstAt, processedAt, committedAt);
        System.out.flush();
    }

    /** The Parallel Consumer version the jar was built with (pom.xml puts it in the manifest). */
    private static String manifestVersion() {
        try (var in = PcBench.class.getResourceAsStream("/META-INF/MANIFEST.MF")) {
            return new java.util.jar.Manifest(in).getMainAttributes().getValue("Parallel-Consumer-Version");
        } catch (Exception e) {
            return "unknown";
        }
    }

    /** Seconds since the JVM started (the process start, as near as the JVM knows it). */
    private static double sinceJvmStart() {
        return (System.currentTimeMillis() - ManagementFactory.getRuntimeMXBean().getStartTime()) / 1000.0;
    }
}
