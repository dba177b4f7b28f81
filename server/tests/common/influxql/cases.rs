//! The `/query` requests compared with InfluxDB 1.8 (`influxql_compat.rs`) and across pods
//! (`fanout.rs`), over [`super::points`].

use super::{ms, T0};

/// The queries compared, each run with `db=g&epoch=ms` (as Grafana sends them).
pub fn queries() -> Vec<String> {
    let range = format!("time >= {} and time <= {}", ms(T0), ms(T0 + 599));
    let wide = format!("time >= {} and time <= {}", ms(T0 - 120), ms(T0 + 719));
    let mut q = vec![
        "SHOW MEASUREMENTS".to_string(),
        "SHOW MEASUREMENTS WITH MEASUREMENT =~ /(?i)CP/ LIMIT 100".into(),
        "SHOW MEASUREMENTS WHERE \"dc\" = 'a'".into(),
        "SHOW TAG KEYS".into(),
        "SHOW TAG KEYS FROM \"cpu\"".into(),
        "SHOW TAG VALUES FROM \"cpu\" WITH KEY = \"host\"".into(),
        "SHOW TAG VALUES WITH KEY IN (\"host\", \"dc\")".into(),
        "SHOW TAG VALUES FROM \"cpu\" WITH KEY = \"host\" WHERE \"dc\" = 'b'".into(),
        "SHOW TAG VALUES FROM \"cpu\" WITH KEY =~ /^h/".into(),
        "SHOW TAG VALUES WITH KEY != \"host\" WHERE \"host\" =~ /h[12]/".into(),
        // Paged per measurement: `mem` has no value past the offset.
        "SHOW TAG VALUES WITH KEY IN (\"host\", \"dc\") LIMIT 2 OFFSET 1".into(),
        "SHOW FIELD KEYS".into(),
        "SHOW FIELD KEYS FROM \"cpu\"".into(),
        "SHOW RETENTION POLICIES on \"g\"".into(),
        "SHOW DATABASES".into(),
        // Cardinalities: InfluxDB estimates a whole database's measurements and series, and
        // counts exactly under any clause (or `EXACT`), as the statements it rewrites them to.
        "SHOW MEASUREMENT CARDINALITY".into(),
        "SHOW MEASUREMENT EXACT CARDINALITY".into(),
        "SHOW MEASUREMENT CARDINALITY FROM \"cpu\"".into(),
        "SHOW MEASUREMENT CARDINALITY WHERE \"host\" = 'h2'".into(),
        "SHOW MEASUREMENT CARDINALITY ON \"nope\"".into(),
        "SHOW SERIES CARDINALITY".into(),
        "SHOW SERIES EXACT CARDINALITY".into(),
        "SHOW SERIES CARDINALITY FROM \"cpu\"".into(),
        "SHOW SERIES CARDINALITY WHERE \"dc\" = 'a'".into(),
        "SHOW SERIES EXACT CARDINALITY FROM /c|m/ LIMIT 1".into(),
        "SHOW SERIES CARDINALITY ON \"nope\"".into(),
        "SHOW SERIES EXACT CARDINALITY WHERE time > now() - 1h".into(),
        "SHOW SERIES EXACT CARDINALITY GROUP BY \"host\"".into(),
        "SHOW TAG KEY CARDINALITY".into(),
        "SHOW TAG KEY EXACT CARDINALITY FROM \"cpu\"".into(),
        "SHOW TAG KEY CARDINALITY WHERE \"host\" = 'h3'".into(),
        "SHOW TAG KEY CARDINALITY GROUP BY \"host\"".into(),
        "SHOW TAG VALUES CARDINALITY WITH KEY = \"host\"".into(),
        "SHOW TAG VALUES EXACT CARDINALITY FROM \"cpu\" WITH KEY IN (\"host\", \"dc\")".into(),
        "SHOW TAG VALUES CARDINALITY WITH KEY =~ /d/ WHERE \"host\" != 'h1'".into(),
        "SHOW TAG VALUES CARDINALITY WITH KEY != \"host\"".into(),
        "SHOW FIELD KEY CARDINALITY".into(),
        "SHOW FIELD KEY EXACT CARDINALITY FROM \"mem\"".into(),
        "SHOW FIELD KEY CARDINALITY ON \"nope\"".into(),
        "SHOW MEASUREMENT EXACT CARDINALITY GROUP BY \"host\"".into(),
        "SHOW MEASUREMENT EXACT CARDINALITY FROM \"nope\"".into(),
        "SHOW MEASUREMENT CARDINALITY LIMIT 1".into(),
        "SHOW SERIES EXACT CARDINALITY OFFSET 1".into(),
        "SHOW TAG KEY CARDINALITY WHERE time > now() - 1h".into(),
        "SHOW TAG VALUES CARDINALITY WITH KEY = \"host\" WHERE time > now() - 1h".into(),
        "SHOW TAG VALUES CARDINALITY FROM \"cpu\" WITH KEY = \"host\" GROUP BY \"dc\"".into(),
        "SHOW FIELD KEY CARDINALITY GROUP BY \"host\"".into(),
        "SHOW FIELD KEY CARDINALITY WHERE \"host\" = 'zz'".into(),
        // Grafana's sum of per-host maxima with a range that starts inside a bucket: the
        // inner's first bucket starts before the range and still counts.
        format!(
            "SELECT sum(\"m\") FROM (SELECT max(\"value\") AS \"m\" FROM \"cpu\" WHERE {part} \
             GROUP BY time(1m), \"host\") WHERE {part} GROUP BY time(1m)",
            part = format!("time >= {} and time <= {}", ms(T0 + 95), ms(T0 + 431))
        ),
        format!(
            "SELECT \"m\" FROM (SELECT mean(\"value\") AS \"m\" FROM \"cpu\" WHERE {range} \
             GROUP BY time(2m)) WHERE time >= {} and time <= {}",
            ms(T0 + 95),
            ms(T0 + 431)
        ),
        // A wildcard over measurements of different fields and tags stands for all of them.
        format!("SELECT * FROM \"cpu\", \"mem\" WHERE \"host\" = 'h1' AND {range} LIMIT 3"),
        // A count of a field the measurement lacks is null in every bucket, not 0.
        format!("SELECT count(\"free\"), count(\"value\") FROM \"cpu\" WHERE {wide} GROUP BY time(1m)"),
        format!("SELECT count(\"free\") + 1, count(\"value\") FROM \"cpu\" WHERE {wide} GROUP BY time(1m)"),
        format!("SELECT max(*) FROM \"cpu\", \"mem\" WHERE {range}"),
        format!("SELECT mean(\"free\") FROM \"cpu\", \"mem\" WHERE {range} GROUP BY *"),
        format!("SELECT count(/e/) FROM /^(cpu|mem)$/ WHERE {range} GROUP BY time(5m), /o/"),
        // Several measurements answer in the order of their names, whatever `FROM`'s.
        format!("SELECT * FROM \"mem\", \"disk\" WHERE {range} GROUP BY *"),
        format!("SELECT count(\"used\") FROM \"mem\", \"disk\" WHERE {range} GROUP BY \"host\" ORDER BY time DESC"),
        // `LIMIT 0` limits nothing, in InfluxDB's SHOW and SELECT alike.
        "SHOW MEASUREMENTS LIMIT 0".into(),
        "SHOW TAG VALUES WITH KEY = \"host\" LIMIT 0 OFFSET 1".into(),
        format!("SELECT \"value\" FROM \"cpu\" WHERE \"host\" = 'h1' AND {range} LIMIT 0"),
        format!("SELECT mean(\"value\") FROM \"cpu\" WHERE {range} GROUP BY \"host\" SLIMIT 0"),
        "SHOW SERIES FROM \"cpu\"".into(),
        "SELECT FROM cpu".into(),
        "SELECT mean(\"value\") FROM \"nosuch\"".into(),
    ];
    for agg in [
        "mean", "max", "min", "sum", "count", "first", "last", "spread", "median", "stddev",
    ] {
        q.push(format!(
            "SELECT {agg}(\"value\") FROM \"autogen\".\"cpu\" WHERE {range} GROUP BY time(1m) fill(null)"
        ));
    }
    q.extend([
        format!("SELECT mean(\"value\") FROM \"cpu\" WHERE {range} GROUP BY time(1m), \"host\" fill(none)"),
        format!("SELECT mean(\"value\") FROM \"cpu\" WHERE {wide} GROUP BY time(1m), \"host\" fill(null)"),
        format!("SELECT mean(\"value\") FROM \"cpu\" WHERE {wide} GROUP BY time(1m), \"host\" fill(0)"),
        format!("SELECT mean(\"value\") FROM \"cpu\" WHERE \"host\" = 'h1' AND {wide} GROUP BY time(1m) fill(previous)"),
        format!("SELECT mean(\"value\") FROM \"cpu\" WHERE \"host\" = 'h1' AND {wide} GROUP BY time(1m) fill(linear)"),
        format!("SELECT max(\"value\"), min(\"value\") FROM \"cpu\" WHERE (\"host\" = 'h1' OR \"host\" = 'h2') AND {range} GROUP BY time(2m)"),
        format!("SELECT mean(\"value\") FROM \"cpu\" WHERE \"host\" =~ /^h[12]$/ AND {range} GROUP BY time(5m), \"dc\""),
        // Grouped over a few known series (their tags named in the plan), and a fill over
        // no series at all (no answer, not a series of empty tags), also inside a subquery.
        format!("SELECT max(\"value\") FROM \"cpu\" WHERE (\"host\" = 'h1' OR \"host\" = 'h2') AND {range} GROUP BY time(1m), \"host\""),
        format!("SELECT mean(\"value\") FROM \"cpu\" WHERE \"host\" = 'nobody' AND {range} GROUP BY time(1m)"),
        format!("SELECT mean(\"value\") FROM \"cpu\" WHERE \"host\" = 'nobody' AND {range} GROUP BY time(1m), \"host\""),
        format!("SELECT count(\"mean\") FROM (SELECT mean(\"value\") FROM \"cpu\" WHERE \"host\" = 'nobody' AND {range} GROUP BY time(1m))"),
        format!("SELECT mean(\"value\") FROM \"cpu\" WHERE \"dc\" != 'a' AND {range} GROUP BY time(5m)"),
        format!("SELECT mean(\"value\") / 100 AS \"pct\" FROM \"cpu\" WHERE {range} GROUP BY time(5m)"),
        format!("SELECT percentile(\"value\", 90) FROM \"cpu\" WHERE {range} GROUP BY time(5m)"),
        // `SLIMIT` counts a group the range, a condition or an `OFFSET` leaves without points.
        format!("SELECT max(\"value\") FROM \"cpu\" WHERE time >= {} AND time <= {} GROUP BY \"host\" SLIMIT 1", ms(T0 + 240), ms(T0 + 290)),
        format!("SELECT mean(\"value\") FROM \"cpu\" WHERE \"value\" > 90 AND time >= {} AND time <= {} GROUP BY \"host\" SLIMIT 2 SOFFSET 1", ms(T0 + 200), ms(T0 + 260)),
        format!("SELECT non_negative_difference(\"n\") FROM \"cpu\" WHERE time >= {} AND time <= {} GROUP BY \"host\" LIMIT 5 OFFSET 3 SLIMIT 2 SOFFSET 1", ms(T0 + 200), ms(T0 + 260)),
        // Without `GROUP BY time` a percentile is at its point's time (values seldom equal).
        format!("SELECT percentile(\"value\", 90) FROM \"cpu\" WHERE {range} GROUP BY \"host\""),
        format!("SELECT percentile(\"value\", 20) * 2 FROM \"cpu\" WHERE \"host\" = 'h1' AND {range}"),
        // Points of one value at one time, of two series: under DESC the later series'.
        format!("SELECT bottom(\"free\", \"host\", 1) FROM \"disk\" WHERE time >= {} AND time <= {} GROUP BY time(2m) ORDER BY time DESC", ms(T0), ms(T0 + 119)),
        format!("SELECT count(distinct(\"n\")) FROM \"cpu\" WHERE {range} GROUP BY time(5m)"),
        format!("SELECT mean(\"value\") FROM \"cpu\" WHERE {range}"),
        format!("SELECT last(\"value\") FROM \"cpu\" WHERE {range}"),
        // Selectors of an integer whose values tie across points and hosts: the time of the
        // earliest greatest (smallest) value, the greatest value at the latest (earliest) time.
        format!("SELECT max(\"n\") FROM \"cpu\" WHERE {range}"),
        format!("SELECT min(\"n\") FROM \"cpu\" WHERE {range}"),
        format!("SELECT max(\"n\") FROM \"cpu\" WHERE {range} GROUP BY \"host\""),
        format!("SELECT last(\"n\") FROM \"cpu\" WHERE {range} GROUP BY time(2m)"),
        format!("SELECT first(\"n\") FROM \"cpu\" WHERE {range} GROUP BY time(2m)"),
        // distinct(): values in the order they first occur, at the bucket's start; several
        // series hold one at the same time.
        format!("SELECT distinct(\"n\") FROM \"cpu\" WHERE {range}"),
        format!("SELECT distinct(\"n\") FROM \"cpu\" WHERE {range} GROUP BY time(2m), \"host\" fill(null)"),
        format!("SELECT DISTINCT \"used\" FROM \"disk\" WHERE {range} GROUP BY \"host\" LIMIT 4"),
        format!("SELECT count(DISTINCT \"n\") FROM \"cpu\" WHERE {range}"),
        format!("SELECT distinct(\"value\") / 100 FROM \"cpu\" WHERE {range} GROUP BY time(5m) LIMIT 4"),
        format!("SELECT abs(distinct(\"n\") - 4) FROM \"cpu\" WHERE {range} GROUP BY \"host\" ORDER BY time DESC"),
        format!("SELECT distinct(\"n\") FROM \"cpu\" WHERE {range} GROUP BY time(2m), \"host\" ORDER BY time DESC"),
        // Casts between numbers: a float as an integer truncates toward zero.
        format!("SELECT \"value\"::integer, \"n\"::float FROM \"cpu\" WHERE \"host\" = 'h1' AND {range}"),
        format!("SELECT mean(\"value\"::integer), max(\"n\"::float) FROM \"cpu\" WHERE {range} GROUP BY time(2m)"),
        format!("SELECT \"used\" FROM \"disk\" WHERE \"free\"::integer = 3 AND {range}"),
        // Math functions, value by value: an integer stays an integer under abs, ceil, floor
        // and round; halves round away from zero; NaN (sqrt of a negative) is null, and the
        // point is still a row. Over aggregates, selectors keep their point's time.
        format!("SELECT abs(\"value\" - 50), round(\"value\" / 10 - 5), ceil(\"value\" / 7), floor(\"value\" / -7), abs(\"n\" - 5), round(\"n\") FROM \"cpu\" WHERE \"host\" = 'h1' AND {range} LIMIT 8"),
        format!("SELECT sqrt(\"value\" - 50), ln(\"value\" - 20), log(\"value\", 2), log2(\"n\"), log10(\"value\"), exp(\"n\"), pow(\"n\", 2) FROM \"cpu\" WHERE \"host\" = 'h2' AND {range} LIMIT 8"),
        format!("SELECT sin(\"value\"), cos(\"n\"), tan(\"value\"), asin(\"value\" / 100), acos(\"value\" / -100), atan(\"value\"), atan2(\"value\", \"n\") FROM \"cpu\" WHERE \"host\" = 'h3' AND {range} LIMIT 5"),
        format!("SELECT round(mean(\"value\")), abs(min(\"value\") - 60), sqrt(sum(\"n\")) FROM \"cpu\" WHERE {range} GROUP BY time(2m), \"host\" fill(null)"),
        format!("SELECT abs(max(\"value\") - 100) FROM \"cpu\" WHERE {range}"),
        format!("SELECT \"value\" FROM \"cpu\" WHERE (round(\"value\") = 51 OR floor(\"value\") = 48) AND {range}"),
        format!("SELECT abs(*) FROM \"mem\" WHERE {range} LIMIT 3"),
        format!("SELECT abs(derivative(mean(\"value\"))), pow(moving_average(max(\"n\"), 2), 2) FROM \"cpu\" WHERE {range} GROUP BY time(1m)"),
        format!("SELECT round(difference(\"n\")), sqrt(abs(derivative(\"value\", 1s))) FROM \"cpu\" WHERE \"host\" = 'h1' AND {range} LIMIT 5"),
        // Arithmetic with constants around a transform (bytes to bits: `* 8`).
        format!("SELECT non_negative_derivative(mean(\"n\"), 1s) * 8 FROM \"cpu\" WHERE {range} GROUP BY time(1m), \"host\""),
        format!("SELECT 100 - derivative(\"value\") AS \"d\", difference(\"n\") / 2 FROM \"cpu\" WHERE \"host\" = 'h1' AND {range} LIMIT 6"),
        format!("SELECT abs(difference(max(\"value\")) / 4 - 1), (cumulative_sum(count(\"n\")) + 1) % 7 FROM \"cpu\" WHERE {wide} GROUP BY time(1m) fill(0)"),
        "SELECT abs(1) FROM \"cpu\"".into(),
        "SELECT pow(\"value\") FROM \"cpu\"".into(),
        // Fill applies to each call before the arithmetic or math over it, as in InfluxDB:
        // an empty bucket's count is 0 in `count(v) * 2`.
        format!("SELECT mean(\"value\") * 2 + 1, round(mean(\"value\")) FROM \"cpu\" WHERE \"host\" = 'h1' AND {wide} GROUP BY time(1m) fill(2.6)"),
        format!("SELECT count(\"value\") * 2, abs(count(\"value\") - 3) FROM \"cpu\" WHERE \"host\" = 'h1' AND {wide} GROUP BY time(1m)"),
        format!("SELECT mean(\"value\") + 1 FROM \"cpu\" WHERE \"host\" = 'h1' AND {wide} GROUP BY time(1m) fill(linear)"),
        format!("SELECT max(\"value\") - min(\"value\") FROM \"cpu\" WHERE {wide} GROUP BY time(1m), \"host\" fill(previous)"),
        // One selector beside other fields or tags: the selected point's row, at its bucket's
        // start under GROUP BY time, an empty bucket a row of nulls; first and last break a
        // tie at one time to the greater value.
        format!("SELECT max(\"value\"), \"host\" FROM \"cpu\" WHERE {range}"),
        format!("SELECT min(\"value\"), \"host\", \"n\" FROM \"cpu\" WHERE {wide} GROUP BY time(2m)"),
        format!("SELECT last(\"value\"), \"host\" FROM \"cpu\" WHERE {range} GROUP BY time(1m) fill(none)"),
        format!("SELECT first(\"n\"), \"value\" FROM \"cpu\" WHERE {wide} GROUP BY time(1m), \"dc\""),
        format!("SELECT \"host\", last(\"n\") FROM \"cpu\" WHERE {range} GROUP BY time(2m) ORDER BY time DESC"),
        format!("SELECT max(\"used\"), \"free\" FROM \"disk\" WHERE {range} GROUP BY \"host\""),
        // top() and bottom(): points keep their times; ties go to the earlier point; a tag
        // argument keeps each of its values' best point (Grafana's builder adds fill(null),
        // which changes nothing).
        format!("SELECT top(\"value\", 3) FROM \"cpu\" WHERE {range}"),
        format!("SELECT bottom(\"n\", 4) FROM \"cpu\" WHERE {range}"),
        format!("SELECT top(\"value\", \"host\", 2) FROM \"cpu\" WHERE {range}"),
        format!("SELECT top(\"n\", \"dc\", 3) FROM \"cpu\" WHERE {range}"),
        format!("SELECT top(\"value\", 2), \"host\" FROM \"cpu\" WHERE {range} GROUP BY time(2m) fill(null)"),
        format!("SELECT bottom(\"used\", 2) AS \"low\", \"free\" FROM \"disk\" WHERE {range} GROUP BY \"host\" ORDER BY time DESC"),
        format!("SELECT top(\"value\", 2), mean(\"value\") FROM \"cpu\" WHERE {range}"),
        // Grafana's math after a selector: applied to the ranked values.
        format!("SELECT top(\"value\", 3) / 100 FROM \"cpu\" WHERE {range} GROUP BY time(5m)"),
        format!("SELECT abs(bottom(\"n\", \"host\", 2) - 10) * 2 AS \"x\" FROM \"cpu\" WHERE {range}"),
        format!("SELECT top(\"n\", 2) * 3 FROM \"cpu\" WHERE {range} GROUP BY \"host\" ORDER BY time DESC"),
        // Under LIMIT or OFFSET, without tags as arguments: only each group's first OFFSET +
        // LIMIT + 1 points rank, then the answer takes the LIMIT and OFFSET.
        format!("SELECT top(\"value\", 2) FROM \"cpu\" WHERE \"host\" = 'h1' AND {range} LIMIT 3"),
        format!("SELECT bottom(\"n\", 2) FROM \"cpu\" WHERE {wide} GROUP BY time(1m), \"host\" LIMIT 4 OFFSET 1"),
        format!("SELECT top(\"value\", 2), \"n\" FROM \"cpu\" WHERE {range} GROUP BY \"host\" ORDER BY time DESC OFFSET 1"),
        format!("SELECT top(\"value\", \"host\", 2) FROM \"cpu\" WHERE {range} LIMIT 3 OFFSET 1"),
        // Over a subquery every point ranks.
        format!("SELECT top(\"value\", 2) FROM (SELECT \"value\" FROM \"cpu\" WHERE {range}) GROUP BY \"host\" LIMIT 3 OFFSET 1"),
        // integral() of one series per group: the trapezium rule; a segment crossing a
        // bucket's end cut at the interpolated value (for an integer field with the earlier
        // point's value kept), one across empty buckets (h1's minute 4) put in its end's; no
        // fill; at time 0 without buckets.
        format!("SELECT integral(\"value\", 1m) FROM \"cpu\" WHERE \"host\" = 'h1' AND {wide} GROUP BY time(1m) fill(null)"),
        format!("SELECT integral(\"value\", 10s) FROM \"cpu\" WHERE \"host\" = 'h2' AND {range} GROUP BY time(45s, 15s) fill(0)"),
        format!("SELECT integral(\"n\", 1m) FROM \"cpu\" WHERE \"host\" = 'h1' AND {wide} GROUP BY time(25s) fill(none)"),
        format!("SELECT integral(\"n\") AS \"area\" FROM \"cpu\" WHERE \"host\" = 'h3' AND {range}"),
        format!("SELECT integral(\"value\", 1m) FROM \"cpu\" WHERE \"host\" = 'h1' AND {wide} GROUP BY time(20s)"),
        format!("SELECT integral(\"n\") FROM \"cpu\" WHERE \"host\" = 'h2' AND {wide} GROUP BY time(70s, 30s)"),
        format!("SELECT integral(\"value\") FROM \"cpu\" WHERE \"host\" = 'h1' AND {range} GROUP BY time(1m) tz('Europe/Paris')"),
        format!("SELECT integral(\"value\") FROM \"cpu\" WHERE \"host\" = 'h1' AND {range} GROUP BY time(1m) LIMIT 2 OFFSET 1"),
        // The last point at its bucket's start: that bucket is not answered.
        format!("SELECT integral(\"n\") FROM \"cpu\" WHERE \"host\" = 'h1' AND time >= {} and time <= {} GROUP BY time(1m)", ms(T0), ms(T0 + 540)),
        "SELECT integral(\"value\") FROM \"cpu\" WHERE \"host\" = 'h1'".into(),
        "SELECT integral(\"n\") FROM \"cpu\" WHERE \"host\" = 'h1'".into(),
        format!("SELECT integral(\"host\") FROM \"cpu\" WHERE {range}"),
        format!("SELECT integral(\"value\", 0s) FROM \"cpu\" WHERE {range}"),
        format!("SELECT integral(\"value\", 'x') FROM \"cpu\" WHERE {range}"),
        format!("SELECT integral() FROM \"cpu\" WHERE {range}"),
        format!("SELECT integral(mean(\"value\")) FROM \"cpu\" WHERE {range} GROUP BY time(1m)"),
        // Several integrals: a row wherever one of them has a value (a float's at time 0, an
        // integer's at the range's start).
        format!("SELECT integral(*) FROM \"mem\" WHERE {range}"),
        format!("SELECT integral(\"value\"), integral(\"n\", 1m) AS \"in\" FROM \"cpu\" WHERE \"host\" = 'h1' AND {wide} GROUP BY time(2m)"),
        // Grafana's transformations stack on the aggregate: `elapsed` works over buckets,
        // `spread` and `stddev` of an aggregate are InfluxDB's errors.
        format!("SELECT elapsed(mean(\"value\"), 10s) FROM \"cpu\" WHERE {range} GROUP BY time(1m) fill(null)"),
        format!("SELECT spread(mean(\"value\")) FROM \"cpu\" WHERE {range} GROUP BY time(1m) fill(null)"),
        format!("SELECT stddev(mean(\"value\")) FROM \"cpu\" WHERE {range} GROUP BY time(1m) fill(null)"),
        format!("SELECT holt_winters(spread(\"value\"), 4, 0) FROM \"cpu\" WHERE {range} GROUP BY time(1m) fill(null)"),
        // holt_winters(): the aggregate's buckets forecast as InfluxDB's Nelder-Mead fit
        // forecasts them (Grafana's "Predictors"; its defaults are 10 and 2).
        format!("SELECT holt_winters(mean(\"value\"), 5, 0) FROM \"cpu\" WHERE {range} GROUP BY time(30s)"),
        format!("SELECT holt_winters_with_fit(max(\"value\"), 3, 4) FROM \"cpu\" WHERE {range} GROUP BY time(20s), \"host\" fill(null)"),
        format!("SELECT holt_winters(sum(\"n\"), 4, 2) AS \"forecast\" FROM \"cpu\" WHERE \"host\" = 'h2' AND {wide} GROUP BY time(1m)"),
        format!("SELECT holt_winters(mean(\"value\"), 3, 0) / 100 FROM \"cpu\" WHERE {range} GROUP BY time(1m, 15s) LIMIT 2 OFFSET 1"),
        format!("SELECT 10 - holt_winters_with_fit(last(\"value\"), 2, 0) FROM \"cpu\" WHERE \"host\" = 'h1' AND {range} GROUP BY time(30s) tz('Europe/Paris')"),
        format!("SELECT holt_winters(mean(\"value\"), 3, 0) FROM \"cpu\" WHERE {range} GROUP BY time(1m) ORDER BY time DESC"),
        format!("SELECT holt_winters(count(\"value\"), 2, 0) FROM \"cpu\" WHERE {range} GROUP BY time(5m), \"host\" SLIMIT 2 SOFFSET 1"),
        format!("SELECT holt_winters(mean(\"value\"), 3) FROM \"cpu\" WHERE {range} GROUP BY time(1m)"),
        format!("SELECT holt_winters(\"value\", 3, 0) FROM \"cpu\" WHERE {range} GROUP BY time(1m)"),
        format!("SELECT holt_winters(mean(\"value\"), 3, 0) FROM \"cpu\" WHERE {range}"),
        // Subqueries: the inner statement's answer as the outer's measurement, with the
        // outer's time range, tags and interval given to the inner.
        format!("SELECT sum(\"max\") FROM (SELECT max(\"value\") FROM \"cpu\" WHERE {range} GROUP BY \"host\")"),
        format!("SELECT mean(\"d\") FROM (SELECT \"value\" - \"n\" AS \"d\" FROM \"cpu\" WHERE \"host\" = 'h1' AND {range})"),
        // Division and modulo by zero: InfluxDB answers 0 (a float's modulo NaN, null),
        // where the engine's infinity answered null and an integer's modulo refused the query.
        format!("SELECT \"value\" / (\"n\" - \"n\"), \"n\" / (\"n\" - \"n\"), \"n\" % 0, \"value\" % 0, \"n\" % 3 FROM \"cpu\" WHERE \"host\" = 'h1' AND {range}"),
        format!("SELECT mean(\"value\") / 0, 1 / (max(\"n\") - max(\"n\")), max(\"n\") % 0 FROM \"cpu\" WHERE {range} GROUP BY time(1m)"),
        format!("SELECT count(\"value\") FROM \"cpu\" WHERE \"value\" / (\"n\" - \"n\") = 0 AND {range}"),
        // InfluxDB's type check of arithmetic: a string or a boolean cannot take part (the
        // engine refused such a query in its own words); a name that is no field is null.
        format!("SELECT \"value\" + 'x' FROM \"cpu\" WHERE \"host\" = 'h1' AND {range}"),
        format!("SELECT first(\"value\") * true FROM \"cpu\" WHERE {range}"),
        format!("SELECT \"value\", \"value\" * \"nope\", -\"nope\" FROM \"cpu\" WHERE \"host\" = 'h1' AND {range}"),
        // mode() of a float (the engine's map of counts takes no float keys).
        format!("SELECT mode(\"value\") FROM \"cpu\" WHERE {range} GROUP BY time(1m), \"host\""),
        // A sign after `/`: the inner statement goes to the pods as text, where `-1 * n`
        // printed without its sign's binding read back as `(value / -1) * n`.
        format!("SELECT mean(\"d\") FROM (SELECT \"value\" / -\"n\" AS \"d\" FROM \"cpu\" WHERE \"host\" = 'h1' AND {range})"),
        format!("SELECT sum(\"mean\") FROM (SELECT mean(\"value\") FROM \"cpu\" WHERE {range} GROUP BY time(1m), \"host\") WHERE {range} GROUP BY time(1m) fill(null)"),
        format!("SELECT max(\"mean\") FROM (SELECT mean(\"value\") FROM \"cpu\" GROUP BY time(2m), \"host\") WHERE {range} GROUP BY \"host\""),
        format!("SELECT sum(\"rate\") FROM (SELECT non_negative_derivative(last(\"n\"), 1s) AS \"rate\" FROM \"cpu\" WHERE {range} GROUP BY time(1m), \"host\") WHERE {range} GROUP BY time(1m)"),
        format!("SELECT \"m\" FROM (SELECT mean(\"value\") AS \"m\" FROM \"cpu\" WHERE {range} GROUP BY time(2m)) WHERE \"m\" > 50"),
        format!("SELECT count(\"value\") FROM (SELECT \"value\" FROM \"cpu\" WHERE {range}) GROUP BY \"host\""),
        format!("SELECT max(\"max\") FROM (SELECT max(\"value\") FROM \"cpu\" GROUP BY \"host\") WHERE {range} GROUP BY time(5m)"),
        format!("SELECT mean(\"max\"), count(\"max\") FROM (SELECT max(\"value\") FROM \"cpu\" WHERE {range} GROUP BY time(1m), \"host\") WHERE \"host\" != 'h2' GROUP BY time(5m)"),
        format!("SELECT max(\"m\") FROM (SELECT mean(\"value\") AS \"m\" FROM \"cpu\" WHERE {wide} GROUP BY time(1m), \"host\") WHERE {wide} GROUP BY time(5m), \"host\" fill(0)"),
        format!("SELECT \"max\" FROM (SELECT max(\"value\") FROM \"cpu\" WHERE {range} GROUP BY time(1m), \"host\") WHERE \"host\" = 'h1' AND {range} LIMIT 4"),
        format!("SELECT last(\"sum\") FROM (SELECT sum(\"n\") FROM \"cpu\" WHERE {range} GROUP BY time(2m), \"dc\") WHERE {range} GROUP BY \"dc\""),
        format!("SELECT x FROM (SELECT y AS x FROM (SELECT \"value\" AS y FROM \"cpu\" WHERE \"host\" = 'h2' AND {range}))"),
        format!("SELECT max(\"s\") FROM (SELECT sum(\"m\") AS \"s\" FROM (SELECT mean(\"value\") AS \"m\" FROM \"cpu\" WHERE {range} GROUP BY time(1m), \"host\") WHERE {range} GROUP BY time(1m)) WHERE {range} GROUP BY time(5m)"),
        // The last point of whole series, read from the earliest of them on.
        "SELECT last(\"value\") FROM \"cpu\" GROUP BY \"host\"".into(),
        "SELECT last(\"used\"), last(\"free\") FROM \"disk\" GROUP BY \"host\"".into(),
        "SELECT last(\"free\") FROM \"disk\"".into(),
        "SELECT last(\"v\") FROM \"live\" GROUP BY \"host\"".into(),
        "SELECT last(\"v\"), last(\"w\") FROM \"live\" GROUP BY \"host\"".into(),
        "SELECT last(\"w\") FROM \"live\"".into(),
        "SELECT last(\"v\"), last(\"w\") FROM \"live\"".into(),
        "SELECT last(*) FROM \"live\" GROUP BY *".into(),
        "SELECT last(\"v\") FROM \"live\" WHERE \"host\" = 'a' OR \"host\" = 'b'".into(),
        "SELECT last(\"v\"), last(\"w\") FROM \"live\" WHERE \"host\" = 'a' OR \"host\" = 'b' GROUP BY \"host\"".into(),
        "SELECT last(\"v\") FROM \"live\" WHERE \"host\" != 'd' GROUP BY \"host\"".into(),
        "SELECT last(\"w\") FROM \"live\" WHERE time > now() - 90m GROUP BY \"host\"".into(),
        // No series matches: the first pass finds no last point, and the floor keeps every row.
        "SELECT last(\"v\") FROM \"live\" WHERE \"host\" = 'nobody' GROUP BY \"host\"".into(),
        "SELECT last(\"v\") FROM \"live\" WHERE \"v\" > 1e300".into(),
        format!("SELECT max(\"value\") - 1 FROM \"cpu\" WHERE {range}"),
        format!("SELECT last(*) FROM \"disk\" WHERE {range} GROUP BY *"),
        format!("SELECT last(\"value\") * 2 FROM \"cpu\" WHERE \"value\" < 50 AND {range} GROUP BY \"host\""),
        format!("SELECT max(\"value\") FROM \"cpu\" WHERE {range} GROUP BY \"host\""),
        format!("SELECT mean(\"value\") FROM \"cpu\" WHERE {range} GROUP BY time(5m), * fill(none)"),
        format!("SELECT mean(\"value\") FROM \"cpu\" WHERE {range} GROUP BY time(5m), \"host\" fill(none) SLIMIT 1"),
        format!("SELECT mean(\"value\") FROM \"cpu\" WHERE {range} GROUP BY time(1m), \"host\" fill(none) LIMIT 2"),
        format!("SELECT \"value\" FROM \"cpu\" WHERE \"host\" = 'h1' AND {range} LIMIT 5"),
        format!("SELECT \"value\", \"host\" FROM \"cpu\" WHERE {range} ORDER BY time DESC LIMIT 4"),
        format!("SELECT * FROM \"mem\" WHERE {range} LIMIT 3"),
        format!("SELECT \"used\" + 1 FROM \"mem\" WHERE {range} LIMIT 3"),
        format!("SELECT mean(\"used\") FROM \"mem\" WHERE {range} GROUP BY time(5m)"),
        format!("SELECT mean(\"value\") FROM /^(cpu|mem)$/ WHERE {range} GROUP BY time(5m)"),
        format!("SELECT mean(*) FROM \"cpu\" WHERE {range} GROUP BY time(5m)"),
        format!("SELECT mean(\"value\") FROM \"cpu\" WHERE {range} GROUP BY time(1m), \"host\" fill(null) ORDER BY time DESC LIMIT 3"),
        format!("SELECT mean(\"value\") FROM \"cpu\" WHERE {range} GROUP BY time(1m, 15s) fill(none)"),
        format!("SELECT count(\"value\") FROM \"cpu\" WHERE \"host\" = 'h1' AND {wide} GROUP BY time(1m) fill(none)"),
        // One most frequent value per bucket: on a tie InfluxDB's pick depends on its sort.
        format!("SELECT mode(\"n\") FROM \"cpu\" WHERE \"host\" = 'h1' AND {range} GROUP BY time(1m)"),
        format!("SELECT \"value\" FROM \"cpu\" WHERE {range} GROUP BY \"host\" ORDER BY time DESC LIMIT 2"),
        format!("SELECT \"value\" FROM \"cpu\" WHERE \"host\" !~ /h1/ AND \"value\" > 50 AND {range} LIMIT 3"),
        format!("SELECT mean(\"value\") FROM \"cpu\" WHERE {range} GROUP BY time(5m), /d/ fill(none)"),
        format!("SHOW DATABASES; SELECT max(\"value\") FROM \"cpu\" WHERE {range}"),
        format!("SELECT non_negative_derivative(mean(\"value\"), 1s) FROM \"cpu\" WHERE {range} GROUP BY time(1m), \"host\" fill(null)"),
        format!("SELECT derivative(mean(\"value\")) FROM \"cpu\" WHERE {range} GROUP BY time(1m)"),
        format!("SELECT difference(max(\"value\")) FROM \"cpu\" WHERE {range} GROUP BY time(1m)"),
        format!("SELECT non_negative_difference(max(\"value\")) FROM \"cpu\" WHERE {range} GROUP BY time(1m)"),
        format!("SELECT cumulative_sum(count(\"value\")) FROM \"cpu\" WHERE {wide} GROUP BY time(1m)"),
        format!("SELECT moving_average(mean(\"value\"), 3) FROM \"cpu\" WHERE {range} GROUP BY time(1m)"),
        // Transforms beside other calls: each call reads its own range (a derivative a bucket
        // more), counts its own LIMIT, and fills the rows another call makes.
        format!("SELECT derivative(mean(\"value\")), mean(\"value\") FROM \"cpu\" WHERE \"host\" = 'h1' AND time >= {} AND time <= {} GROUP BY time(1m)", ms(T0 + 5), ms(T0 + 200)),
        format!("SELECT difference(max(\"value\")), max(\"value\"), min(\"value\") FROM \"cpu\" WHERE time >= {} AND time <= {} GROUP BY time(1m), \"host\" fill(none)", ms(T0 + 5), ms(T0 + 599)),
        format!("SELECT non_negative_derivative(last(\"value\")), max(\"value\") FROM \"cpu\" WHERE {wide} GROUP BY time(2m), * fill(previous) LIMIT 5"),
        format!("SELECT cumulative_sum(mean(\"value\")), non_negative_difference(min(\"n\")) FROM \"cpu\" WHERE \"n\" >= 5 AND time >= {} AND time <= {} GROUP BY time(1m)", ms(T0 + 95), ms(T0 + 431)),
        format!("SELECT derivative(mean(\"value\")), mean(\"value\") FROM \"cpu\" WHERE time >= {} AND time <= {} GROUP BY time(40s), \"host\" ORDER BY time DESC LIMIT 2 OFFSET 1", ms(T0 + 5), ms(T0 + 555)),
        format!("SELECT non_negative_derivative(sum(\"n\")), moving_average(max(\"value\"), 4) FROM \"cpu\" WHERE {wide} GROUP BY time(90s, 1m) fill(0)"),
        // Host h1 has no point of the condition in the range, only in the bucket before it that
        // the derivative reads: its `count` is null beside the derivative's rows, not 0.
        format!("SELECT non_negative_derivative(count(\"used\")), count(\"used\") * 2 FROM \"disk\" WHERE \"free\" < 2 AND time >= {} AND time <= {} GROUP BY time(20s), *", ms(T0 + 200), ms(T0 + 260)),
        format!("SELECT difference(count(\"used\")), count(\"used\") FROM \"disk\" WHERE \"free\" < 2 AND time >= {} AND time <= {} GROUP BY time(20s), * fill(3)", ms(T0 + 200), ms(T0 + 260)),
        // A moving average over the last values, past empty buckets.
        format!("SELECT moving_average(first(\"value\"), 3) FROM \"cpu\" WHERE \"host\" = 'h1' AND time >= {} AND time <= {} GROUP BY time(1m)", ms(T0 + 95), ms(T0 + 431)),
        format!("SELECT moving_average(median(\"used\"), 2) FROM \"mem\" WHERE {range} GROUP BY time(10s, 1m) fill(null) ORDER BY time DESC"),
        format!("SELECT derivative(\"value\", 1s) FROM \"cpu\" WHERE \"host\" = 'h1' AND {range} LIMIT 5"),
        format!("SELECT non_negative_derivative(\"value\") FROM \"cpu\" WHERE \"host\" = 'h2' AND {range} LIMIT 5"),
        format!("SELECT difference(\"n\") FROM \"cpu\" WHERE \"host\" = 'h1' AND {range} LIMIT 5"),
        format!("SELECT elapsed(\"value\", 10s) FROM \"cpu\" WHERE \"host\" = 'h2' AND {range} LIMIT 8"),
        format!("SELECT cumulative_sum(\"n\") FROM \"cpu\" WHERE \"host\" = 'h3' AND {range} LIMIT 5"),
        format!("SELECT moving_average(\"value\", 3) FROM \"cpu\" WHERE \"host\" = 'h1' AND {range} LIMIT 5"),
        format!("SELECT derivative(\"value\") FROM \"cpu\" WHERE {range} GROUP BY \"host\" LIMIT 3"),
        format!("SELECT \"value\" FROM \"cpu\" WHERE {range} GROUP BY time(1m)"),
        format!("SELECT derivative(\"value\") FROM \"cpu\" WHERE {range} GROUP BY time(1m)"),
        format!("SELECT mean(\"value\") FROM \"cpu\" WHERE time >= {} and time <= {} GROUP BY time(1d) tz('Europe/Paris')", ms(T0 - 86400), ms(T0 + 86400)),
        format!("SELECT count(\"value\") FROM \"cpu\" WHERE {range} GROUP BY time(1h) fill(none) tz('Asia/Kolkata')"),
        format!("SELECT max(\"value\") FROM \"cpu\" WHERE {range} GROUP BY time(5m) tz('America/New_York')"),
        format!("select mean(\"value\") from \"g\".\"autogen\".\"cpu\" where {range} group by time(5m) order by time desc limit 1"),
        format!("SELECT mean(\"value\") FROM \"g\"..\"cpu\" WHERE {range} GROUP BY time(5m) SLIMIT 1 SOFFSET 0"),
        format!("SELECT \"value\"::field, \"host\"::tag FROM \"cpu\" WHERE \"host\" = 'h3' AND {range} LIMIT 2 OFFSET 3"),
    ]);
    q
}

/// `holt_winters()` of a mean over several series, compared with InfluxDB's within
/// [`FITTED`]: a bucket's mean differs from InfluxDB's in its last bit where the two sum the
/// points in another order (InfluxDB orders points of one time by its merge, and adds partial
/// means times their counts), and on this data the model's fit carries that to about 1e-9 of
/// the forecast (on other data it can land elsewhere). Across pods the forecast is one pod's
/// to the bit: both add each bucket's points in time order. The fit itself is InfluxDB's to the bit on InfluxDB's own
/// means (`forecast.rs`, `forecasts_are_influxdbs_to_the_last_bit`).
pub fn fitted_queries() -> Vec<String> {
    let range = format!("time >= {} and time <= {}", ms(T0), ms(T0 + 599));
    vec![
        // Grafana's defaults for the predictor (10 and 2) at a 10 s interval.
        format!("SELECT holt_winters(mean(\"value\"), 10, 2) FROM \"cpu\" WHERE {range} GROUP BY time(10s) fill(null)"),
        format!("SELECT holt_winters_with_fit(mean(\"value\"), 3, 5) FROM \"cpu\" WHERE {range} GROUP BY time(10s)"),
    ]
}

/// Queries with `$name` parameters and the `params` sent with them: a value of each kind in
/// each place one can stand, values that cannot be bound, and JSON that cannot be read.
pub fn bound_queries() -> Vec<(&'static str, &'static str)> {
    vec![
        ("SELECT \"value\" FROM \"cpu\" WHERE \"host\" = $h AND time < $t LIMIT 3", r#"{"h": "h2", "t": "2020-08-01T00:01:00Z"}"#),
        ("SELECT count(\"value\") FROM $m WHERE \"value\" > $v", r#"{"m": {"identifier": "cpu"}, "v": 50}"#),
        ("SELECT count(\"value\") FROM \"cpu\" WHERE \"value\" > $v AND \"n\" < $n", r#"{"v": 49.5, "n": {"integer": 4}}"#),
        ("SELECT count(\"value\") FROM \"cpu\" WHERE \"value\" > $v", r#"{"v": {"float": 50}}"#),
        ("SELECT count(\"value\") FROM \"cpu\" WHERE \"value\" > -$v", r#"{"v": -50}"#),
        ("SELECT $f FROM \"cpu\" WHERE \"host\" =~ $re GROUP BY $g LIMIT $n OFFSET $o", r#"{"f": {"identifier": "n"}, "re": {"regex": "^h[13]$"}, "g": {"identifier": "host"}, "n": 2, "o": 1}"#),
        ("SELECT mean(\"value\") FROM \"cpu\" WHERE time >= $from AND time < $from + 5m GROUP BY time($i) fill($fill)", r#"{"from": "2020-08-01T00:00:00Z", "i": {"duration": "1m"}, "fill": 0}"#),
        ("SELECT max(\"value\") FROM \"cpu\" WHERE time >= 1596240000000ms AND time < 1596240300000ms GROUP BY time($i), \"dc\" fill($fill)", r#"{"i": {"duration": 60000000000}, "fill": {"identifier": "previous"}}"#),
        ("SELECT count(\"value\") FROM /$/ WHERE \"host\" = $h; SELECT count(\"n\") FROM \"cpu\" WHERE \"dc\" = $h", r#"{"h": "h1"}"#),
        ("SHOW TAG VALUES FROM $re WITH KEY = $k WHERE \"host\" != $h", r#"{"re": {"regex": "^c"}, "k": {"identifier": "host"}, "h": "h2"}"#),
        ("SHOW MEASUREMENTS WITH MEASUREMENT =~ $re", r#"{"re": {"regex": "^(cpu|mem)$"}}"#),
        ("SHOW TAG KEYS FROM $m; SHOW FIELD KEYS FROM $m", r#"{"m": {"ident": "mem"}}"#),
        ("SHOW SERIES FROM \"cpu\" WHERE \"host\" = $h", r#"{"h": "h3"}"#),
        // What cannot be bound, and where it is used.
        ("SELECT \"value\" FROM \"cpu\" WHERE \"host\" = $h", r#"{}"#),
        ("SELECT \"value\" FROM \"cpu\" WHERE \"host\" = $h", ""),
        ("SELECT \"value\" FROM \"cpu\" WHERE \"host\" = $", r#"{"h": "h1"}"#),
        ("SELECT \"value\" FROM $m", r#"{"m": "cpu"}"#),
        ("SELECT \"value\" FROM $m", r#"{"m": null}"#),
        ("SELECT \"value\" FROM \"cpu\" WHERE \"value\" > $v", r#"{"v": [1, 2]}"#),
        ("SELECT \"value\" FROM \"cpu\" WHERE \"value\" > $v", r#"{"v": {"integer": 2.5}}"#),
        ("SELECT \"value\" FROM \"cpu\" WHERE \"value\" > $v", r#"{"v": {"integer": 1, "float": 2}}"#),
        ("SELECT \"value\" FROM \"cpu\" WHERE \"value\" > $v", r#"{"v": {"number": "x"}}"#),
        ("SELECT \"value\" FROM \"cpu\" WHERE \"value\" > $v", r#"{"v": {"duration": true}}"#),
        ("SELECT \"value\" FROM \"cpu\" WHERE \"value\" > $v", r#"{"v": {"when": 1}}"#),
        ("SELECT \"value\" FROM \"cpu\" WHERE \"value\" > $v", r#"{"v": {"integer": 1e3}}"#),
        ("SELECT \"value\" FROM \"cpu\" WHERE \"host\" =~ $re", r#"{"re": "^h1"}"#),
        ("SELECT \"value\" FROM \"cpu\" LIMIT $n", r#"{"n": 1.5}"#),
        ("SELECT \"value\" FROM \"cpu\" LIMIT $n", r#"{"n": -1}"#),
        ("SELECT \"value\" FROM \"cpu\" WHERE \"value\" > $v", r#"{"v": 1e3}"#),
        ("SELECT \"value\" FROM \"cpu\" WHERE \"value\" > $v", r#"{"v": 99999999999999999999}"#),
        ("SELECT \"value\" FROM \"cpu\" WHERE \"value\" > $v", r#"{"v": 1.0e400}"#),
        ("SELECT \"value\" FROM \"cpu\" WHERE \"value\" > $v", "[1]"),
        ("SELECT \"value\" FROM \"cpu\" WHERE \"value\" > $v", "{\"v\": "),
    ]
}

/// Queries whose answers InfluxDB 1.8 shapes differently, with what [`regrouped`] undoes.
/// `integral()` of several groups: InfluxDB answers its groups out of tag order, and a group's
/// last bucket as a series of its own after the others (with several integrals, a row for
/// each); the values must still be equal.
pub fn regrouped_queries() -> Vec<String> {
    let range = format!("time >= {} and time <= {}", ms(T0), ms(T0 + 599));
    vec![
        format!("SELECT integral(\"value\") FROM \"cpu\" WHERE {range} GROUP BY \"host\""),
        format!("SELECT integral(\"n\") FROM \"cpu\" WHERE {range} GROUP BY time(2m), \"host\""),
        format!("SELECT integral(\"used\") AS \"area\" FROM \"disk\" WHERE {range} GROUP BY time(2m), * fill(previous)"),
        format!("SELECT integral(\"value\") FROM \"cpu\" WHERE \"value\" > 50 AND {range} GROUP BY \"dc\""),
        format!("SELECT integral(*) FROM \"disk\" WHERE {range} GROUP BY time(3m), \"host\""),
    ]
}
