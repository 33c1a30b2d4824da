package medkg;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import org.neo4j.configuration.GraphDatabaseSettings;
import org.neo4j.configuration.connectors.BoltConnector;
import org.neo4j.configuration.connectors.HttpConnector;
import org.neo4j.configuration.connectors.HttpsConnector;
import org.neo4j.configuration.helpers.SocketAddress;
import org.neo4j.dbms.api.DatabaseManagementService;
import org.neo4j.dbms.api.DatabaseManagementServiceBuilder;
import org.neo4j.graphdb.GraphDatabaseService;
import org.neo4j.io.ByteUnit;

/**
 * Runs Neo4j 5.26 community embedded, with the Bolt connector on 127.0.0.1 and authentication on.
 *
 * <p>Usage: {@code Neo4jLauncher HOME PORT PASSWORD [READY_FILE]}. The password of user {@code neo4j}
 * is set on first start, so clients exercise the driver's real auth path. When the server accepts
 * connections the launcher writes READY_FILE (if given) and prints {@code READY bolt://127.0.0.1:PORT}.
 * It runs until it is terminated (SIGTERM/SIGINT), then shuts the database down cleanly.
 */
public final class Neo4jLauncher {
    private Neo4jLauncher() {}

    public static void main(String[] args) throws Exception {
        if (args.length < 3) {
            System.err.println("usage: Neo4jLauncher HOME PORT PASSWORD [READY_FILE]");
            System.exit(2);
        }
        Path home = Path.of(args[0]).toAbsolutePath();
        int port = Integer.parseInt(args[1]);
        String password = args[2];
        Path readyFile = args.length > 3 ? Path.of(args[3]) : null;
        Files.createDirectories(home);

        DatabaseManagementService dbms = new DatabaseManagementServiceBuilder(home)
                .setConfig(BoltConnector.enabled, true)
                .setConfig(BoltConnector.listen_address, new SocketAddress("127.0.0.1", port))
                .setConfig(BoltConnector.advertised_address, new SocketAddress("127.0.0.1", port))
                .setConfig(BoltConnector.encryption_level, BoltConnector.EncryptionLevel.DISABLED)
                .setConfig(HttpConnector.enabled, false)
                .setConfig(HttpsConnector.enabled, false)
                .setConfig(GraphDatabaseSettings.auth_enabled, true)
                .setConfig(GraphDatabaseSettings.pagecache_memory, ByteUnit.mebiBytes(512))
                .setConfig(GraphDatabaseSettings.transaction_timeout, Duration.ofMinutes(10))
                .build();

        CountDownLatch stopped = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            dbms.shutdown();
            stopped.countDown();
        }, "neo4j-shutdown"));

        GraphDatabaseService system = dbms.database(GraphDatabaseSettings.SYSTEM_DATABASE_NAME);
        try {
            system.executeTransactionally(
                    "ALTER USER neo4j SET PASSWORD $password CHANGE NOT REQUIRED", Map.of("password", password));
        } catch (RuntimeException e) {
            // On a restart with the same home the password is already set (Neo4j refuses "the same
            // password"); anything else is a real error.
            if (!String.valueOf(e.getMessage()).toLowerCase().contains("same")) {
                throw e;
            }
        }
        dbms.database(GraphDatabaseSettings.DEFAULT_DATABASE_NAME); // fails fast if neo4j db is not up

        String uri = "bolt://127.0.0.1:" + port;
        if (readyFile != null) {
            Files.writeString(readyFile, uri + "\n");
        }
        System.out.println("READY " + uri);
        System.out.flush();
        stopped.await();
    }
}
