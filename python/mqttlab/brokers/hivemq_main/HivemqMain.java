// mqttlab's launcher for HiveMQ Community Edition embedded: HiveMQ is started with the config,
// data and extensions folders of one run, and stays up until the JVM is asked to stop (SIGTERM
// from mqttlab), when it is shut down through its own API so that it closes its listeners and
// persistence cleanly. Compiled by `mqttlab brokers install hivemq` against the HiveMQ jars.

import com.hivemq.embedded.EmbeddedHiveMQ;

import java.lang.reflect.Field;
import java.nio.file.Path;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

public final class HivemqMain {

    // mqttlab stops a child with SIGTERM and kills it 10 s later: finish before that.
    private static final long STOP_SECONDS = 8;

    private HivemqMain() {
    }

    public static void main(String[] args) throws InterruptedException {
        if (args.length != 3) {
            System.err.println("usage: HivemqMain CONFIG_FOLDER DATA_FOLDER EXTENSIONS_FOLDER");
            System.exit(2);
        }
        applyInflightWindow(System.getProperty("mqttlab.hivemq.inflightWindow"));
        EmbeddedHiveMQ hivemq = EmbeddedHiveMQ.builder()
                .withConfigurationFolder(Path.of(args[0]))
                .withDataFolder(Path.of(args[1]))
                .withExtensionsFolder(Path.of(args[2]))
                .build();
        CountDownLatch stopped = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            try {
                hivemq.stop().get(STOP_SECONDS, TimeUnit.SECONDS);
            } catch (Exception e) {
                System.err.println("mqttlab: HiveMQ did not stop cleanly: " + e);
            } finally {
                stopped.countDown();
            }
        }, "mqttlab-hivemq-stop"));
        try {
            hivemq.start().join();
        } catch (RuntimeException e) {
            System.err.println("mqttlab: HiveMQ did not start: " + e);
            e.printStackTrace();
            System.exit(1);
        }
        System.out.println("mqttlab: HiveMQ is serving");
        stopped.await();
    }

    /**
     * HiveMQ sends an MQTT 3 subscriber at most this many unacknowledged QoS 1/2 messages. The
     * limit is an internal constant, not a config.xml setting, so it is set before start; a
     * HiveMQ release without it keeps its default (said on stderr, not fatal).
     */
    private static void applyInflightWindow(String window) {
        if (window == null || window.isEmpty()) {
            return;
        }
        try {
            Class<?> internal = Class.forName("com.hivemq.configuration.service.InternalConfigurations");
            Field field = internal.getField("MAX_INFLIGHT_WINDOW_SIZE_MESSAGES");
            field.setInt(null, Integer.parseInt(window));
        } catch (ReflectiveOperationException | NumberFormatException | ClassCastException e) {
            System.err.println("mqttlab: cannot set HiveMQ's inflight window (" + e + "); its default stays");
        }
    }
}
