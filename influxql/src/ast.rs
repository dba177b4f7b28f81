//! The parsed form of a query. It is typed where InfluxDB would reject the alternatives anyway
//! (GROUP BY dimensions, fill options, ORDER BY), so the executor needs no second validation
//! pass, and generic ([`Expr`]) where InfluxDB checks meaning only when it runs the query
//! (select fields, WHERE conditions).

pub use crate::duration::Duration;

/// One statement of a query string.
#[derive(Debug, Clone, PartialEq)]
pub enum Statement {
    Select(Box<SelectStatement>),
    ShowDatabases,
    ShowRetentionPolicies {
        database: Option<String>,
    },
    ShowMeasurements(ShowMeasurements),
    ShowTagKeys(ShowTagKeys),
    ShowTagValues(ShowTagValues),
    ShowFieldKeys(ShowFieldKeys),
    ShowSeries(ShowSeries),
    ShowCardinality(ShowCardinality),
    CreateDatabase(CreateDatabase),
    /// A statement InfluxDB 1.8 knows but sluice does not implement (`DROP DATABASE`,
    /// `SHOW USERS`, ...). Its body is skipped up to the next `;` without being checked, so
    /// the other statements of the query still run and this one can be answered with an error
    /// of its own.
    Unsupported {
        /// The leading keywords, upper case: `DROP DATABASE`, `SHOW USERS`, `EXPLAIN`.
        kind: String,
        /// The statement as written, without surrounding whitespace.
        text: String,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub struct SelectStatement {
    pub fields: Vec<Field>,
    pub sources: Vec<Source>,
    pub condition: Option<Expr>,
    pub group_by: Vec<Dimension>,
    /// `None` when the query has no `fill(...)`; InfluxDB then fills with null.
    pub fill: Option<Fill>,
    /// `ORDER BY time ASC|DESC`, the only ordering InfluxDB 1.x accepts.
    pub order: Option<SortOrder>,
    pub limit: Option<u64>,
    pub offset: Option<u64>,
    pub slimit: Option<u64>,
    pub soffset: Option<u64>,
    /// The IANA name from `tz('Europe/Paris')`, unchecked: whether the zone exists is up to
    /// whoever evaluates the query.
    pub timezone: Option<String>,
}

/// One entry of the select list.
#[derive(Debug, Clone, PartialEq)]
pub struct Field {
    pub expr: Expr,
    pub alias: Option<String>,
}

/// Something to select from: a measurement (or regex of measurements), or a subquery.
#[derive(Debug, Clone, PartialEq)]
pub enum Source {
    Measurement(Measurement),
    Subquery(Box<SelectStatement>),
}

/// `m`, `"rp"."m"`, `"db"."rp"."m"`, `db..m`, `/re/`, `"rp"./re/`. Empty database or
/// retention policy segments (`db..m`) are `None`: the default applies.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Measurement {
    pub database: Option<String>,
    pub retention_policy: Option<String>,
    pub name: MeasurementName,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum MeasurementName {
    Name(String),
    Regex(Regex),
}

/// A regular expression in its source form, with `\/` already turned into `/`. It is not
/// compiled here: InfluxDB uses Go's RE2 syntax, and the executor decides how to run it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Regex(pub String);

impl Regex {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A `GROUP BY` entry.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Dimension {
    /// `time(interval[, offset])`. The interval is kept as written, even zero or negative.
    Time {
        interval: Duration,
        offset: Option<TimeOffset>,
    },
    /// A tag key; a `::tag` cast on it is dropped, as InfluxDB ignores it there.
    Tag(String),
    /// `GROUP BY *`: every tag.
    Wildcard,
    /// Every tag whose key matches.
    Regex(Regex),
}

/// The second argument of `GROUP BY time(...)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TimeOffset {
    Duration(Duration),
    /// `now()`: windows aligned on the query's evaluation time.
    Now,
}

/// `fill(...)`: what an empty `GROUP BY time` window yields.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Fill {
    Null,
    None,
    Previous,
    Linear,
    Integer(i64),
    Float(f64),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SortOrder {
    Ascending,
    Descending,
}

/// An expression: a select field, a condition, a function argument.
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    /// A field or tag key, optionally cast: `"value"`, `"host"::tag`, `v::float`. Segmented
    /// references (`a.b`) are joined with dots, as InfluxDB does.
    VarRef {
        name: String,
        data_type: Option<DataType>,
    },
    Literal(Literal),
    /// `*`, `*::field`, `*::tag`.
    Wildcard(Option<WildcardType>),
    /// `DISTINCT f` without parentheses; `distinct(f)` is an ordinary [`Expr::Call`].
    Distinct(String),
    /// A function call. The name is lower case whatever the query used, as in InfluxDB.
    Call {
        name: String,
        args: Vec<Expr>,
    },
    Binary {
        lhs: Box<Expr>,
        op: BinaryOp,
        rhs: Box<Expr>,
    },
    /// Parentheses are kept: they matter to how InfluxDB prints and names the expression.
    Paren(Box<Expr>),
}

#[derive(Debug, Clone, PartialEq)]
pub enum Literal {
    Integer(i64),
    /// An integer too large for `i64`.
    Unsigned(u64),
    Float(f64),
    String(String),
    Boolean(bool),
    /// A duration, or a timestamp written as one (`1596240000000ms`).
    Duration(Duration),
    Regex(Regex),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BinaryOp {
    Add,
    Sub,
    Mul,
    Div,
    Mod,
    BitAnd,
    BitOr,
    BitXor,
    And,
    Or,
    Eq,
    NotEq,
    EqRegex,
    NotEqRegex,
    Lt,
    LtEq,
    Gt,
    GtEq,
}

impl BinaryOp {
    /// InfluxQL's binding strength: OR < AND < comparisons < `+ - | ^` < `* / % &`.
    pub fn precedence(self) -> u8 {
        match self {
            BinaryOp::Or => 1,
            BinaryOp::And => 2,
            BinaryOp::Eq
            | BinaryOp::NotEq
            | BinaryOp::EqRegex
            | BinaryOp::NotEqRegex
            | BinaryOp::Lt
            | BinaryOp::LtEq
            | BinaryOp::Gt
            | BinaryOp::GtEq => 3,
            BinaryOp::Add | BinaryOp::Sub | BinaryOp::BitOr | BinaryOp::BitXor => 4,
            BinaryOp::Mul | BinaryOp::Div | BinaryOp::Mod | BinaryOp::BitAnd => 5,
        }
    }

    /// Comparisons and logical operators, which InfluxDB refuses in a select list.
    pub fn is_condition(self) -> bool {
        self.precedence() <= 3
    }
}

/// The `::type` cast of a field or tag reference.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DataType {
    Float,
    Integer,
    Unsigned,
    String,
    Boolean,
    /// `::field`: any field type.
    Field,
    Tag,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WildcardType {
    Field,
    Tag,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ShowMeasurements {
    pub database: Option<String>,
    /// `WITH MEASUREMENT = m` or `=~ /re/`.
    pub with_measurement: Option<Measurement>,
    pub condition: Option<Expr>,
    pub order: Option<SortOrder>,
    pub limit: Option<u64>,
    pub offset: Option<u64>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ShowTagKeys {
    pub database: Option<String>,
    pub sources: Vec<Measurement>,
    pub condition: Option<Expr>,
    pub order: Option<SortOrder>,
    pub limit: Option<u64>,
    pub offset: Option<u64>,
    pub slimit: Option<u64>,
    pub soffset: Option<u64>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ShowTagValues {
    pub database: Option<String>,
    pub sources: Vec<Measurement>,
    pub key: TagKeyFilter,
    pub condition: Option<Expr>,
    pub order: Option<SortOrder>,
    pub limit: Option<u64>,
    pub offset: Option<u64>,
}

/// The required `WITH KEY ...` of `SHOW TAG VALUES`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum TagKeyFilter {
    Eq(String),
    NotEq(String),
    In(Vec<String>),
    Regex(Regex),
    NotRegex(Regex),
}

#[derive(Debug, Clone, PartialEq)]
pub struct ShowFieldKeys {
    pub database: Option<String>,
    pub sources: Vec<Measurement>,
    pub order: Option<SortOrder>,
    pub limit: Option<u64>,
    pub offset: Option<u64>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ShowSeries {
    pub database: Option<String>,
    pub sources: Vec<Measurement>,
    pub condition: Option<Expr>,
    pub order: Option<SortOrder>,
    pub limit: Option<u64>,
    pub offset: Option<u64>,
}

/// `SHOW MEASUREMENT|SERIES|TAG KEY|FIELD KEY [EXACT] CARDINALITY` and `SHOW TAG VALUES
/// [EXACT] CARDINALITY ... WITH KEY ...`.
#[derive(Debug, Clone, PartialEq)]
pub struct ShowCardinality {
    pub of: CardinalityOf,
    pub exact: bool,
    pub database: Option<String>,
    pub sources: Vec<Measurement>,
    pub condition: Option<Expr>,
    pub group_by: Vec<Dimension>,
    pub limit: Option<u64>,
    pub offset: Option<u64>,
}

/// What a `SHOW ... CARDINALITY` counts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CardinalityOf {
    Measurements,
    Series,
    TagKeys,
    /// The distinct values of the keys `WITH KEY` selects.
    TagValues(TagKeyFilter),
    FieldKeys,
}

/// `CREATE DATABASE name [WITH [DURATION d] [REPLICATION n] [SHARD DURATION d] [NAME rp]]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreateDatabase {
    pub name: String,
    /// Present when the statement has a `WITH` clause: the default policy to create with it.
    pub retention_policy: Option<RetentionPolicySpec>,
}

/// The policy options of `CREATE DATABASE ... WITH`. `DURATION INF` parses as a zero
/// duration, which InfluxDB (and sluice) take as "keep forever".
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RetentionPolicySpec {
    pub duration: Option<Duration>,
    pub replication: Option<u32>,
    pub shard_duration: Option<Duration>,
    pub name: Option<String>,
}
