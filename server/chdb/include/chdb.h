/*
 * sluice's own declarations for the libchdb C API.
 *
 * Why this file exists: no package registry ships chdb.h, and chdb-rust's
 * build script runs bindgen over `$CHDB_INCLUDE_DIR/chdb.h`. We therefore keep
 * a header of our own, trimmed to what chdb-rust =2.0.0 actually calls with
 * the `arrow` feature on, plus the version probe we use at start-up.
 *
 * Rules for editing it:
 *   - Every struct layout, enum value and signature here is ABI. They were
 *     checked against the chdb-core C API for the engine we link (chDB
 *     26.7.3); change them only when the engine changes.
 *   - Declare only what libchdb.so exports (`nm -D --defined-only`).
 *   - Typedef and tag names are what bindgen turns into Rust names, and
 *     chdb-rust refers to them by name: `chdb_result`, `chdb_connection`,
 *     `chdb_arrow_options`, `chdb_state_CHDBSuccess`, ... Do not rename.
 *   - chdb-rust switches optional code on by grepping this text for symbol
 *     names, so comments matter too: the engine's backup/restore/classify
 *     entry points and its direct Arrow-insert entry points are deliberately
 *     neither declared nor spelled out here. Naming them would compile in
 *     crate modules that need declarations we do not carry (and the direct
 *     insert is not exported by the library at all; the crate falls back to
 *     INSERT ... SELECT FROM ArrowStream(...)).
 */
#ifndef SLUICE_CHDB_H
#define SLUICE_CHDB_H
#pragma once

#ifdef __cplusplus
#include <cstddef>
#include <cstdint>
extern "C" {
#else
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#endif

/* ------------------------------------------------------------------------ */
/* Engine identity                                                           */
/* ------------------------------------------------------------------------ */

/* Release string of the loaded libchdb (e.g. "26.7.3"), owned by the
 * library and valid while it stays loaded. We compare it with what we built
 * against before serving traffic. */
const char * chdb_version(void);

/* ------------------------------------------------------------------------ */
/* Status codes and handles                                                  */
/* ------------------------------------------------------------------------ */

/* Outcome of calls that report success/failure rather than a result. */
typedef enum chdb_state
{
    CHDBSuccess = 0,
    CHDBError = 1
} chdb_state;

/* A query result, a streaming cursor, or insert statistics. Opaque: read it
 * through the chdb_result_* accessors and free it with
 * chdb_destroy_query_result(). */
typedef struct chdb_result_
{
    void * internal_data;
} chdb_result;

/* A session on the process-wide engine. chdb_connect() hands out a pointer
 * to one of these; every other call takes the handle itself. */
typedef struct chdb_connection_
{
    void * internal_data;
} * chdb_connection;

/* The three Arrow handles are just the Arrow C Data Interface structs
 * (ArrowArrayStream, ArrowSchema, ArrowArray) under an engine-specific
 * pointer type; callers cast their own pointers to them. */
typedef struct chdb_arrow_stream_
{
    void * internal_data;
} * chdb_arrow_stream;

typedef struct chdb_arrow_schema_
{
    void * internal_data;
} * chdb_arrow_schema;

typedef struct chdb_arrow_array_
{
    void * internal_data;
} * chdb_arrow_array;

/* An open streaming INSERT. Always released with chdb_destroy_insert_stream(). */
typedef struct chdb_insert_stream_
{
    void * internal_data;
} * chdb_insert_stream;

/* ------------------------------------------------------------------------ */
/* Connections                                                               */
/* ------------------------------------------------------------------------ */

/* Boots the engine (first caller) or attaches to it. argv is a command
 * line, argv[0] being a program name; `--path=<dir>` picks the data
 * directory, default ":memory:". The engine holds ONE data path per process:
 * a different path is refused until every connection is closed.
 * `--<setting>=<value>` arguments act like SET on this connection only.
 * Returns NULL (or a pointer to a NULL handle) on failure. */
chdb_connection * chdb_connect(int argc, char ** argv);

/* Closes what chdb_connect() returned. */
void chdb_close_conn(chdb_connection * conn);

/* ------------------------------------------------------------------------ */
/* Buffered queries                                                          */
/* ------------------------------------------------------------------------ */

/* Runs one statement and returns its whole output in `format`. The `_n`
 * forms take explicit byte lengths, so nothing needs a NUL terminator.
 * Errors come back inside the result (chdb_result_error), not as NULL. */
chdb_result * chdb_query_n(
    chdb_connection conn, const char * query, size_t query_len, const char * format, size_t format_len);

/* Same, binding `{name:Type}` placeholders in the engine: values are never
 * spliced into SQL text. Four parallel arrays of `param_count` entries. */
chdb_result * chdb_query_with_params_n(
    chdb_connection conn,
    const char * query,
    size_t query_len,
    const char * format,
    size_t format_len,
    const char * const * param_names,
    const size_t * param_name_lens,
    const char * const * param_values,
    const size_t * param_value_lens,
    size_t param_count);

/* ------------------------------------------------------------------------ */
/* Streaming reads (text formats)                                            */
/* ------------------------------------------------------------------------ */

/* Starts a cursor; pull chunks with chdb_stream_fetch_result() until one is
 * empty. A connection runs one statement at a time, so fetch/cancel on one
 * cursor must not race each other. */
chdb_result * chdb_stream_query(chdb_connection conn, const char * query, const char * format);

chdb_result * chdb_stream_query_n(
    chdb_connection conn, const char * query, size_t query_len, const char * format, size_t format_len);

chdb_result * chdb_stream_query_with_params_n(
    chdb_connection conn,
    const char * query,
    size_t query_len,
    const char * format,
    size_t format_len,
    const char * const * param_names,
    const size_t * param_name_lens,
    const char * const * param_values,
    const size_t * param_value_lens,
    size_t param_count);

/* Next chunk of a cursor; empty once exhausted (and on every call after). */
chdb_result * chdb_stream_fetch_result(chdb_connection conn, chdb_result * result);

/* Stops a cursor early. The cursor still has to be destroyed afterwards. */
void chdb_stream_cancel_query(chdb_connection conn, chdb_result * result);

/* Frees any chdb_result: buffered result, cursor, chunk, insert stats. */
void chdb_destroy_query_result(chdb_result * result);

/* ------------------------------------------------------------------------ */
/* Streaming INSERT                                                          */
/* ------------------------------------------------------------------------ */

/* Opens an INSERT (statement without FORMAT or inline data) whose rows are
 * then pushed as raw `format`-encoded chunks. Never returns NULL: check
 * chdb_stream_insert_error(). The connection is busy until the stream ends. */
chdb_insert_stream chdb_stream_insert_n(
    chdb_connection conn, const char * query, size_t query_len, const char * format, size_t format_len);

chdb_insert_stream chdb_stream_insert_with_params_n(
    chdb_connection conn,
    const char * query,
    size_t query_len,
    const char * format,
    size_t format_len,
    const char * const * param_names,
    const size_t * param_name_lens,
    const char * const * param_values,
    const size_t * param_value_lens,
    size_t param_count);

/* Pushes one chunk (copied; may block for backpressure). */
chdb_state chdb_stream_append(chdb_insert_stream stream, const void * data, size_t len);

/* Ends input and commits; the returned result carries rows/bytes written or
 * the error. Does not free the stream. */
chdb_result * chdb_stream_done(chdb_insert_stream stream);

/* Abandons the insert without committing further data (no rollback). */
void chdb_stream_cancel_insert(chdb_insert_stream stream);

/* Error text of the stream, or NULL while it is healthy. */
const char * chdb_stream_insert_error(chdb_insert_stream stream);

/* Required for every stream, on success and error paths alike. */
void chdb_destroy_insert_stream(chdb_insert_stream stream);

/* ------------------------------------------------------------------------ */
/* Result accessors                                                          */
/* ------------------------------------------------------------------------ */

/* Output bytes, owned by the result. */
char * chdb_result_buffer(chdb_result * result);
size_t chdb_result_length(chdb_result * result);
/* Wall time in seconds. */
double chdb_result_elapsed(chdb_result * result);
/* Rows / bytes in the result set. */
uint64_t chdb_result_rows_read(chdb_result * result);
uint64_t chdb_result_bytes_read(chdb_result * result);
/* Rows / bytes read from storage. */
uint64_t chdb_result_storage_rows_read(chdb_result * result);
uint64_t chdb_result_storage_bytes_read(chdb_result * result);
/* Rows / bytes written; counts materialized-view writes as well. */
uint64_t chdb_result_rows_written(chdb_result * result);
uint64_t chdb_result_bytes_written(chdb_result * result);
/* Error text, or NULL when the statement succeeded. */
const char * chdb_result_error(chdb_result * result);

/* ------------------------------------------------------------------------ */
/* Arrow                                                                     */
/* ------------------------------------------------------------------------ */

/* Type-mapping switches for Arrow export; passing NULL means
 * {0, 0, 1}. Each field is a C int used as a boolean:
 *   unsupported_as_binary          1 = degrade JSON/Dynamic/AggregateFunction
 *                                  columns to binary instead of failing
 *   low_cardinality_as_dictionary  1 = export LowCardinality as dictionaries
 *   string_as_string               1 = String as utf8, 0 = as binary */
typedef struct chdb_arrow_options
{
    int unsupported_as_binary;
    int low_cardinality_as_dictionary;
    int string_as_string;
} chdb_arrow_options;

/* Runs a query and fills the caller's ArrowArrayStream with the whole
 * result; the caller then owns the stream's release callback. The returned
 * result only carries metrics or an error. */
chdb_result * chdb_query_arrow_n(
    chdb_connection conn,
    const char * query,
    size_t query_len,
    chdb_arrow_stream out_stream,
    const chdb_arrow_options * options);

/* Arrow cursors: one record batch per chdb_stream_fetch_arrow(), with a
 * schema that stays fixed for the life of the cursor. Cancel and destroy
 * as for text cursors. */
chdb_result * chdb_stream_query_arrow_n(
    chdb_connection conn, const char * query, size_t query_len, const chdb_arrow_options * options);

chdb_result * chdb_stream_query_arrow_with_params_n(
    chdb_connection conn,
    const char * query,
    size_t query_len,
    const chdb_arrow_options * options,
    const char * const * param_names,
    const size_t * param_name_lens,
    const char * const * param_values,
    const size_t * param_value_lens,
    size_t param_count);

/* Fills `out_batch` (an ArrowArrayStream holding at most one batch); an
 * exhausted cursor yields a released array on the first get_next. */
chdb_state chdb_stream_fetch_arrow(chdb_connection conn, chdb_result * stream_result, chdb_arrow_stream out_batch);

/* Makes caller-owned Arrow data readable as the table function
 * ArrowStream('<table_name>') on this connection. The data must stay alive
 * until it is unregistered. This is how our Arrow ingest reaches the engine:
 * register, INSERT ... SELECT * FROM ArrowStream('name'), unregister. */
chdb_state chdb_arrow_scan(chdb_connection conn, const char * table_name, chdb_arrow_stream arrow_stream);

chdb_state chdb_arrow_array_scan(
    chdb_connection conn, const char * table_name, chdb_arrow_schema arrow_schema, chdb_arrow_array arrow_array);

chdb_state chdb_arrow_unregister_table(chdb_connection conn, const char * table_name);

/* ------------------------------------------------------------------------ */
/* Process-wide runtime                                                      */
/* ------------------------------------------------------------------------ */

/* 0 stops the engine from installing its own signal handlers; only effective
 * before the first chdb_connect(). */
void chdb_set_signal_handlers_enabled(int enabled);

/* Puts every handler the engine installed back to SIG_DFL. */
void chdb_reset_signal_handlers(void);

/* Joins all engine threads. Fails (CHDBError) while any connection is open.
 * Once it has run the engine cannot be restarted in this process:
 * chdb_connect() fails from then on. */
chdb_state chdb_shutdown(void);

#ifdef __cplusplus
}
#endif

#endif /* SLUICE_CHDB_H */
