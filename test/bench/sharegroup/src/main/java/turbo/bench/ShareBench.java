package turbo.bench;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * Kafka's own answer to "more consumers than partitions" as one of turbo's
 * benchmark peers (test/bench): a share group (KIP-932, Kafka 4.2+) of
 * {@code --consumers} KafkaShareConsumers, each polling up to
 * {@code --threads-per-consumer} records, doing their simulated work at once
 * on a pool of that many threads and acknowledging each (ACCEPT, explicit
 * mode), until {@code --records} records were
 * acknowledged. Then every consumer commits its acknowledgements
 * synchronously (the broker has them when commitSync returns) and closes,
 * and the process exits 0 (1 on a failure, 2 on bad arguments).
 *
 * <p>A share group has no committed offsets for the benchmark to watch from
 * outside, so the process's exit is the end of its wall time: it exits only
 * once the broker acknowledged every record, which is what the other peers'
 * last commit means.
 *
 * <p>Configuration, chosen for this workload (records of equal, short work,
 * no order): {@code share.acquire.mode=record_limit} and a small
 * {@code max.poll.records}, so that the broker hands each consumer only a
 * few records at a time (in the default batch-optimized mode it hands out
 * whole produced batches, thousands of records, to one consumer while the
 * others wait); the group starts at the earliest offset
 * ({@code share.auto.offset.reset=earliest}, a group config set with the
 * Admin API before the consumers join).
 */
public final class ShareBench {
    private static final String USAGE = String.join("\n",
            "usage: java -jar share-bench.jar --brokers HOST:PORT[,..] --topic T --group G --records N",
            "                                 [--consumers 16] [--threads-per-consumer 1] [--work-ms 0]",
            "                                 [--max-poll-records threads-per-consumer]");

    public static void main(String[] argv) throws Exception {
        Map<String, String> args = parse(argv);
        if (args == null) {
            System.err.println(USAGE);
            System.exit(2);
        }
        String brokers = args.get("brokers"), topic = args.get("topic"), group = args.get("group");
        long records;
        int consumers, threads, workMs, maxPoll;
        try {
            records = Long.parseLong(args.get("records"));
            consumers = Integer.parseInt(args.getOrDefault("consumers", "16"));
            threads = Integer.parseInt(args.getOrDefault("threads-per-consumer", "1"));
            workMs = Integer.parseInt(args.getOrDefault("work-ms", "0"));
            maxPoll = Integer.parseInt(args.getOrDefault("max-poll-records", String.valueOf(threads)));
        } catch (NumberFormatException e) {
            System.err.println("share-bench: " + e.getMessage() + "\n" + USAGE);
            System.exit(2);
            return;
        }
        if (brokers == null || topic == null || group == null || records <= 0 || consumers <= 0 || threads <= 0 || maxPoll <= 0) {
            System.err.println(USAGE);
            System.exit(2);
        }
        startAtEarliest(brokers, group);

        AtomicLong acknowledged = new AtomicLong();
        AtomicBoolean enough = new AtomicBoolean();
        AtomicReference<Throwable> failure = new AtomicReference<>();
        List<Thread> consumerThreads = new ArrayList<>();
        for (int i = 0; i < consumers; i++) {
            Properties p = new Properties();
            p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, brokers);
            p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
            p.put(ConsumerConfig.CLIENT_ID_CONFIG, "share-bench-" + i);
            p.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, maxPoll);
            p.put("share.acknowledgement.mode", "explicit");
            p.put("share.acquire.mode", "record_limit");
            Thread t = new Thread(() -> {
                try {
                    consume(p, topic, threads, workMs, records, acknowledged, enough);
                } catch (Throwable e) {
                    failure.compareAndSet(null, e);
                    enough.set(true);
                }
            }, "share-consumer-" + i);
            consumerThreads.add(t);
            t.start();
        }
        for (Thread t : consumerThreads) {
            t.join();
        }
        if (failure.get() != null) {
            System.err.println("share-bench: " + failure.get());
            System.exit(1);
        }
        System.out.printf("{\"acknowledged\":%d,\"consumers\":%d}%n", acknowledged.get(), consumers);
        System.exit(0);
    }

    /**
     * One consumer's loop: poll, work, acknowledge; then commit and close.
     * With more than one thread per consumer, a poll's records run at once
     * on the consumer's own pool, and the polling thread acknowledges them
     * when all are done (a KafkaShareConsumer is not thread-safe).
     */
    private static void consume(Properties p, String topic, int threads, int workMs, long records,
            AtomicLong acknowledged, AtomicBoolean enough) throws Exception {
        ExecutorService pool = Executors.newFixedThreadPool(threads);
        try (KafkaShareConsumer<byte[], byte[]> c =
                new KafkaShareConsumer<>(p, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
            c.subscribe(Set.of(topic));
            while (!enough.get()) {
                ConsumerRecords<byte[], byte[]> recs = c.poll(Duration.ofMillis(100));
                List<Future<?>> work = new ArrayList<>();
                for (ConsumerRecord<byte[], byte[]> r : recs) {
                    work.add(pool.submit(() -> {
                        if (workMs > 0) {
                            Thread.sleep(workMs);
                        }
                        return null;
                    }));
                }
                int i = 0;
                for (ConsumerRecord<byte[], byte[]> r : recs) {
                    work.get(i++).get();
                    if (enough.get()) {
                        // Every record a poll returned must be acknowledged in
                        // explicit mode: give the surplus back to the group.
                        c.acknowledge(r, AcknowledgeType.RELEASE);
                        continue;
                    }
                    c.acknowledge(r, AcknowledgeType.ACCEPT);
                    if (acknowledged.incrementAndGet() >= records) {
                        enough.set(true);
                    }
                }
            }
            c.commitSync(Duration.ofSeconds(30));
        } finally {
            pool.shutdownNow();
        }
    }

    /** Sets the group to start at the earliest offset (its default is the latest). */
    private static void startAtEarliest(String brokers, String group) throws Exception {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, brokers);
        try (Admin admin = Admin.create(p)) {
            ConfigResource res = new ConfigResource(ConfigResource.Type.GROUP, group);
            AlterConfigOp op = new AlterConfigOp(new ConfigEntry("share.auto.offset.reset", "earliest"), AlterConfigOp.OpType.SET);
            admin.incrementalAlterConfigs(Map.of(res, List.of(op))).all().get();
        }
    }

    private static Map<String, String> parse(String[] argv) {
        Map<String, String> m = new HashMap<>();
        for (int i = 0; i < argv.length; i++) {
            if (!argv[i].startsWith("--") || i + 1 >= argv.length) {
                return null;
            }
            m.put(argv[i].substring(2), argv[++i]);
        }
        return m;
    }
}
