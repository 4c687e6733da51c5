/*
 * Arrow column buffers filled in C from decoded records: the leaf buffers of the change log (changes.py's
 * records_to_arrow) and of a flat table (arrow.py's RowsToArrow), without a Python object per row or cell.
 *
 * Optional, like the PlainBuffer decoder it follows (client/plainbuffer/_speedups.c): built when a C compiler is
 * there, used when that decoder is (arrow.py's compiled_arrow()). Each function returns None for any input the
 * Python builders treat specially, so they run then and behave as before, errors included. This file knows only
 * the CPython C API: the spark/ modules turn the buffers into pyarrow arrays.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* ---- records -> Arrow change-log columns ----------------------------------------------------------------- */
/* change_log_arrays(records, action_names, op_names): the leaf buffers of spark/changes.py's change-log table,
   filled in C from decoded Record tuples (no Python object per row or cell). Returns None when the input holds
   anything but the exact types the fast path knows (then records_to_arrow's Python path runs and behaves as
   before, errors included). */

enum { AK_I64, AK_F64, AK_BOOL, AK_STR };
enum { A_OK = 0, A_ERROR = -1, A_FALLBACK = 1 };

typedef struct {
    char *p;
    Py_ssize_t len, cap;
} abuf;

static int abuf_reserve(abuf *b, Py_ssize_t extra) {
    if (b->len + extra <= b->cap) {
        return 0;
    }
    Py_ssize_t cap = b->cap ? b->cap : 1024;
    while (cap < b->len + extra) {
        cap *= 2;
    }
    char *p = PyMem_Realloc(b->p, (size_t)cap);
    if (p == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    b->p = p;
    b->cap = cap;
    return 0;
}

static inline int abuf_put(abuf *b, const void *src, Py_ssize_t k) {
    if (k <= 0 || src == NULL) {
        return 0;
    }
    if (abuf_reserve(b, k) < 0) {
        return -1;
    }
    memcpy(b->p + b->len, src, (size_t)k);
    b->len += k;
    return 0;
}

/* One Arrow column being built: validity and bool values one byte per slot (packed at the end); int64/double
   values 8 bytes per slot; strings as int32 offsets plus data. */
typedef struct {
    int kind;
    Py_ssize_t n, nulls;
    abuf valid, values, data;
} acol;

static int acol_init(acol *c, int kind) {
    memset(c, 0, sizeof(*c));
    c->kind = kind;
    if (kind == AK_STR) {
        int32_t zero = 0;
        return abuf_put(&c->values, &zero, 4);
    }
    return 0;
}

static void acol_free(acol *c) {
    PyMem_Free(c->valid.p);
    PyMem_Free(c->values.p);
    PyMem_Free(c->data.p);
    memset(c, 0, sizeof(*c));
}

static int acol_slot(acol *c, int valid, const void *value, Py_ssize_t size) {
    unsigned char v = valid ? 1 : 0;
    if (abuf_put(&c->valid, &v, 1) < 0) {
        return A_ERROR;
    }
    c->n += 1;
    c->nulls += !valid;
    if (c->kind == AK_STR) {
        if (size > 0) {
            if (c->data.len + size > INT32_MAX) {
                return A_FALLBACK; /* more than int32 offsets hold: the Python path (chunked arrays) */
            }
            if (abuf_put(&c->data, value, size) < 0) {
                return A_ERROR;
            }
        }
        int32_t end = (int32_t)c->data.len;
        return abuf_put(&c->values, &end, 4) < 0 ? A_ERROR : A_OK;
    }
    static const char zeros[8] = {0};
    return abuf_put(&c->values, valid ? value : zeros, size) < 0 ? A_ERROR : A_OK;
}

static inline int acol_null(acol *c) {
    return acol_slot(c, 0, NULL, c->kind == AK_BOOL ? 1 : (c->kind == AK_STR ? 0 : 8));
}
static inline int acol_i64(acol *c, int64_t x) { return acol_slot(c, 1, &x, 8); }
static inline int acol_f64(acol *c, double x) { return acol_slot(c, 1, &x, 8); }
static inline int acol_bool(acol *c, int x) {
    unsigned char b = x ? 1 : 0;
    return acol_slot(c, 1, &b, 1);
}
static inline int acol_str(acol *c, const char *p, Py_ssize_t len) { return acol_slot(c, 1, p, len); }

/* One byte per slot -> an LSB-first bitmap (Arrow's layout), as bytes. */
static PyObject *pack_bits(const abuf *b, Py_ssize_t n) {
    PyObject *out = PyBytes_FromStringAndSize(NULL, (n + 7) / 8);
    if (out == NULL) {
        return NULL;
    }
    unsigned char *o = (unsigned char *)PyBytes_AS_STRING(out);
    memset(o, 0, (size_t)((n + 7) / 8));
    const unsigned char *s = (const unsigned char *)b->p;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (s[i]) {
            o[i >> 3] |= (unsigned char)(1u << (i & 7));
        }
    }
    return out;
}

/* (length, null_count, validity bytes or None, values/offsets bytes, data bytes or None) */
static PyObject *acol_finish(acol *c) {
    PyObject *validity = c->nulls ? pack_bits(&c->valid, c->n) : Py_NewRef(Py_None);
    PyObject *values = c->kind == AK_BOOL ? pack_bits(&c->values, c->n)
                                          : PyBytes_FromStringAndSize(c->values.p ? c->values.p : "", c->values.len);
    PyObject *data = c->kind == AK_STR ? PyBytes_FromStringAndSize(c->data.p ? c->data.p : "", c->data.len)
                                       : Py_NewRef(Py_None);
    if (validity == NULL || values == NULL || data == NULL) {
        Py_XDECREF(validity);
        Py_XDECREF(values);
        Py_XDECREF(data);
        return NULL;
    }
    return Py_BuildValue("(nnNNN)", c->n, c->nulls, validity, values, data);
}

/* The typed-value leaves of the change log: type name, then int, double, bool, string, binary. */
enum { TV_TYPE, TV_INT, TV_DOUBLE, TV_BOOL, TV_STRING, TV_BINARY, TV_COUNT };
static const int TV_KINDS[TV_COUNT] = {AK_STR, AK_I64, AK_F64, AK_BOOL, AK_STR, AK_STR};

static int typed_nulls_except(acol *tv, int keep) {
    for (int k = TV_INT; k < TV_COUNT; k++) {
        if (k != keep && acol_null(&tv[k]) != A_OK) {
            return A_ERROR;
        }
    }
    return A_OK;
}

#define TYPE_NAME(col, text) acol_str((col), (text), (Py_ssize_t)(sizeof(text) - 1))

static int typed_value(acol *tv, PyObject *value) {
    int st;
    if (value == Py_None) {
        if (acol_null(&tv[TV_TYPE]) != A_OK) {
            return A_ERROR;
        }
        return typed_nulls_except(tv, -1);
    }
    if (value == Py_True || value == Py_False) {
        if (TYPE_NAME(&tv[TV_TYPE], "BOOLEAN") != A_OK || acol_bool(&tv[TV_BOOL], value == Py_True) != A_OK) {
            return A_ERROR;
        }
        return typed_nulls_except(tv, TV_BOOL);
    }
    if (PyLong_CheckExact(value)) {
        int overflow = 0;
        long long x = PyLong_AsLongLongAndOverflow(value, &overflow);
        if (overflow) {
            return A_FALLBACK;
        }
        if (x == -1 && PyErr_Occurred()) {
            return A_ERROR;
        }
        if (TYPE_NAME(&tv[TV_TYPE], "INTEGER") != A_OK || acol_i64(&tv[TV_INT], x) != A_OK) {
            return A_ERROR;
        }
        return typed_nulls_except(tv, TV_INT);
    }
    if (PyFloat_CheckExact(value)) {
        if (TYPE_NAME(&tv[TV_TYPE], "DOUBLE") != A_OK || acol_f64(&tv[TV_DOUBLE], PyFloat_AS_DOUBLE(value)) != A_OK) {
            return A_ERROR;
        }
        return typed_nulls_except(tv, TV_DOUBLE);
    }
    if (PyUnicode_CheckExact(value)) {
        Py_ssize_t len;
        const char *p = PyUnicode_AsUTF8AndSize(value, &len);
        if (p == NULL) { /* lone surrogates: let the Python path report it */
            PyErr_Clear();
            return A_FALLBACK;
        }
        if (TYPE_NAME(&tv[TV_TYPE], "STRING") != A_OK) {
            return A_ERROR;
        }
        st = acol_str(&tv[TV_STRING], p, len);
        return st != A_OK ? st : typed_nulls_except(tv, TV_STRING);
    }
    if (PyBytes_CheckExact(value)) {
        if (TYPE_NAME(&tv[TV_TYPE], "BINARY") != A_OK) {
            return A_ERROR;
        }
        st = acol_str(&tv[TV_BINARY], PyBytes_AS_STRING(value), PyBytes_GET_SIZE(value));
        return st != A_OK ? st : typed_nulls_except(tv, TV_BINARY);
    }
    return A_FALLBACK; /* subclasses, bytes-likes, INF_MIN/INF_MAX...: the Python path decides */
}

static int utf8_of(acol *c, PyObject *text) {
    if (!PyUnicode_CheckExact(text)) {
        return A_FALLBACK;
    }
    Py_ssize_t len;
    const char *p = PyUnicode_AsUTF8AndSize(text, &len);
    if (p == NULL) {
        PyErr_Clear();
        return A_FALLBACK;
    }
    return acol_str(c, p, len);
}

/* dict lookup of an enum member's name (action_names / op_names) written as a string */
static int name_from(acol *c, PyObject *names, PyObject *key) {
    PyObject *name = PyDict_GetItemWithError(names, key); /* borrowed */
    if (name == NULL) {
        if (PyErr_Occurred()) {
            PyErr_Clear(); /* unhashable: the Python path raises its own error */
        }
        return A_FALLBACK;
    }
    return utf8_of(c, name);
}

static int int_or_null(acol *c, PyObject *value) {
    if (value == Py_None) {
        return acol_null(c);
    }
    if (!PyLong_CheckExact(value)) {
        return A_FALLBACK;
    }
    int overflow = 0;
    long long x = PyLong_AsLongLongAndOverflow(value, &overflow);
    if (overflow) {
        return A_FALLBACK;
    }
    if (x == -1 && PyErr_Occurred()) {
        return A_ERROR;
    }
    return acol_i64(c, x);
}

#define CL_ACTION 0
#define CL_PK 1                    /* name + TV_COUNT leaves */
#define CL_COL (CL_PK + 1 + TV_COUNT) /* name, op, timestamp + TV_COUNT leaves */
#define CL_SEQ (CL_COL + 3 + TV_COUNT)
#define CL_COUNT (CL_SEQ + 3)

#define TRY(expr) \
    do { \
        st = (expr); \
        if (st != A_OK) { \
            goto done; \
        } \
    } while (0)

static PyObject *py_change_log_arrays(PyObject *module, PyObject *args) {
    (void)module;
    PyObject *records, *action_names, *op_names;
    if (!PyArg_ParseTuple(args, "OO!O!:change_log_arrays", &records, &PyDict_Type, &action_names, &PyDict_Type,
                          &op_names)) {
        return NULL;
    }
    PyObject *seq = PySequence_Fast(records, "records must be a sequence");
    if (seq == NULL) {
        return NULL;
    }
    acol cols[CL_COUNT];
    abuf pk_offsets = {0}, col_offsets = {0};
    int st = A_OK;
    int inited = 0;
    int32_t zero = 0;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject **items = PySequence_Fast_ITEMS(seq);
    for (; inited < CL_COUNT; inited++) {
        int kind = AK_STR;
        if (inited >= CL_PK + 1 && inited < CL_COL) {
            kind = TV_KINDS[inited - CL_PK - 1];
        } else if (inited == CL_COL + 2 || inited >= CL_SEQ) {
            kind = AK_I64;
        } else if (inited >= CL_COL + 3 && inited < CL_SEQ) {
            kind = TV_KINDS[inited - CL_COL - 3];
        }
        if (acol_init(&cols[inited], kind) < 0) {
            st = A_ERROR;
            goto done;
        }
    }
    if (abuf_put(&pk_offsets, &zero, 4) < 0 || abuf_put(&col_offsets, &zero, 4) < 0) {
        st = A_ERROR;
        goto done;
    }
    for (Py_ssize_t r = 0; r < n; r++) {
        PyObject *record = items[r];
        if (!PyTuple_Check(record) || PyTuple_GET_SIZE(record) < 4) {
            st = A_FALLBACK;
            goto done;
        }
        TRY(name_from(&cols[CL_ACTION], action_names, PyTuple_GET_ITEM(record, 0)));
        PyObject *pk = PyTuple_GET_ITEM(record, 1);
        if (!PyTuple_Check(pk)) {
            st = A_FALLBACK;
            goto done;
        }
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(pk); i++) {
            PyObject *item = PyTuple_GET_ITEM(pk, i);
            if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 2) {
                st = A_FALLBACK;
                goto done;
            }
            TRY(utf8_of(&cols[CL_PK], PyTuple_GET_ITEM(item, 0)));
            TRY(typed_value(&cols[CL_PK + 1], PyTuple_GET_ITEM(item, 1)));
        }
        PyObject *columns = PyTuple_GET_ITEM(record, 2);
        if (!PyTuple_Check(columns)) {
            st = A_FALLBACK;
            goto done;
        }
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(columns); i++) {
            PyObject *col = PyTuple_GET_ITEM(columns, i);
            if (!PyTuple_Check(col) || PyTuple_GET_SIZE(col) != 4) {
                st = A_FALLBACK;
                goto done;
            }
            TRY(utf8_of(&cols[CL_COL], PyTuple_GET_ITEM(col, 0)));
            TRY(name_from(&cols[CL_COL + 1], op_names, PyTuple_GET_ITEM(col, 3)));
            TRY(int_or_null(&cols[CL_COL + 2], PyTuple_GET_ITEM(col, 2)));
            TRY(typed_value(&cols[CL_COL + 3], PyTuple_GET_ITEM(col, 1)));
        }
        if (cols[CL_PK].n > INT32_MAX || cols[CL_COL].n > INT32_MAX) {
            st = A_FALLBACK;
            goto done;
        }
        int32_t pk_end = (int32_t)cols[CL_PK].n, col_end = (int32_t)cols[CL_COL].n;
        if (abuf_put(&pk_offsets, &pk_end, 4) < 0 || abuf_put(&col_offsets, &col_end, 4) < 0) {
            st = A_ERROR;
            goto done;
        }
        PyObject *sequence = PyTuple_GET_ITEM(record, 3);
        if (sequence == Py_None) {
            for (int k = 0; k < 3; k++) {
                TRY(acol_null(&cols[CL_SEQ + k]));
            }
        } else {
            if (!PyTuple_Check(sequence) || PyTuple_GET_SIZE(sequence) != 3) {
                st = A_FALLBACK;
                goto done;
            }
            for (int k = 0; k < 3; k++) {
                PyObject *part = PyTuple_GET_ITEM(sequence, k);
                if (part == Py_None) {
                    st = A_FALLBACK;
                    goto done;
                }
                TRY(int_or_null(&cols[CL_SEQ + k], part));
            }
        }
    }
done:;
    PyObject *out = NULL;
    if (st == A_OK) {
        out = PyTuple_New(CL_COUNT + 3);
        if (out != NULL) {
            PyTuple_SET_ITEM(out, 0, PyLong_FromSsize_t(n));
            PyTuple_SET_ITEM(out, 1, PyBytes_FromStringAndSize(pk_offsets.p, pk_offsets.len));
            PyTuple_SET_ITEM(out, 2, PyBytes_FromStringAndSize(col_offsets.p, col_offsets.len));
            for (int k = 0; k < CL_COUNT; k++) {
                PyTuple_SET_ITEM(out, 3 + k, acol_finish(&cols[k]));
            }
            for (int k = 0; k < CL_COUNT + 3; k++) {
                if (PyTuple_GET_ITEM(out, k) == NULL) {
                    Py_CLEAR(out);
                    break;
                }
            }
        }
    } else if (st == A_FALLBACK) {
        out = Py_NewRef(Py_None);
    }
    for (int k = 0; k < inited; k++) {
        acol_free(&cols[k]);
    }
    PyMem_Free(pk_offsets.p);
    PyMem_Free(col_offsets.p);
    Py_DECREF(seq);
    return out;
}

#undef TRY
#undef TYPE_NAME

/* flat_arrays(rows, specs, cells): the columns of spark/arrow.py's RowsToArrow for a schema of key and
   newest-version cell columns, filled in C from decoded Row tuples. `specs` holds one (source, kind, key index)
   per output column (source 0 key, 1 cell, 2 left to the caller; kind 0 INTEGER, 1 DOUBLE, 2 BOOLEAN, 3 STRING,
   4 BINARY), `cells` maps a cell column's name to its output position. Returns None when a value does not have
   its column's exact type (or a key is missing): RowsToArrow's Python path then reports or nulls it. */

enum { FK_INTEGER, FK_DOUBLE, FK_BOOLEAN, FK_STRING, FK_BINARY };

static int flat_value(acol *c, int kind, PyObject *value) {
    if (value == Py_None) {
        return acol_null(c);
    }
    switch (kind) {
    case FK_INTEGER:
        if (PyLong_CheckExact(value)) {
            int overflow = 0;
            long long x = PyLong_AsLongLongAndOverflow(value, &overflow);
            if (overflow) {
                return A_FALLBACK;
            }
            if (x == -1 && PyErr_Occurred()) {
                return A_ERROR;
            }
            return acol_i64(c, x);
        }
        break;
    case FK_DOUBLE:
        if (PyFloat_CheckExact(value)) {
            return acol_f64(c, PyFloat_AS_DOUBLE(value));
        }
        break;
    case FK_BOOLEAN:
        if (value == Py_True || value == Py_False) {
            return acol_bool(c, value == Py_True);
        }
        break;
    case FK_STRING:
        if (PyUnicode_CheckExact(value)) {
            return utf8_of(c, value);
        }
        break;
    case FK_BINARY:
        if (PyBytes_CheckExact(value)) {
            return acol_str(c, PyBytes_AS_STRING(value), PyBytes_GET_SIZE(value));
        }
        break;
    }
    return A_FALLBACK;
}

static PyObject *py_flat_arrays(PyObject *module, PyObject *args) {
    (void)module;
    PyObject *rows, *specs, *cells;
    if (!PyArg_ParseTuple(args, "OO!O!:flat_arrays", &rows, &PyTuple_Type, &specs, &PyDict_Type, &cells)) {
        return NULL;
    }
    Py_ssize_t width = PyTuple_GET_SIZE(specs);
    int *source = PyMem_Calloc((size_t)width + 1, sizeof(int));
    int *kind = PyMem_Calloc((size_t)width + 1, sizeof(int));
    Py_ssize_t *key_index = PyMem_Calloc((size_t)width + 1, sizeof(Py_ssize_t));
    PyObject **held = PyMem_Calloc((size_t)width + 1, sizeof(PyObject *)); /* borrowed: this row's values */
    acol *cols = PyMem_Calloc((size_t)width + 1, sizeof(acol));
    PyObject *seq = NULL, *out = NULL;
    int st = A_OK;
    if (source == NULL || kind == NULL || key_index == NULL || held == NULL || cols == NULL) {
        PyErr_NoMemory();
        st = A_ERROR;
        goto done;
    }
    for (Py_ssize_t i = 0; i < width; i++) {
        PyObject *spec = PyTuple_GET_ITEM(specs, i);
        if (!PyArg_ParseTuple(spec, "iin", &source[i], &kind[i], &key_index[i])) {
            st = A_ERROR;
            goto done;
        }
        if (kind[i] < FK_INTEGER || kind[i] > FK_BINARY || source[i] < 0 || source[i] > 2) {
            PyErr_Format(PyExc_ValueError, "flat_arrays: bad spec %R", spec);
            st = A_ERROR;
            goto done;
        }
        static const int kinds[] = {AK_I64, AK_F64, AK_BOOL, AK_STR, AK_STR};
        if (acol_init(&cols[i], kinds[kind[i]]) < 0) {
            st = A_ERROR;
            goto done;
        }
    }
    seq = PySequence_Fast(rows, "rows must be a sequence");
    if (seq == NULL) {
        st = A_ERROR;
        goto done;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject **items = PySequence_Fast_ITEMS(seq);
    for (Py_ssize_t r = 0; r < n; r++) {
        PyObject *row = items[r];
        if (!PyTuple_Check(row) || PyTuple_GET_SIZE(row) < 2) {
            st = A_FALLBACK;
            goto done;
        }
        PyObject *pk = PyTuple_GET_ITEM(row, 0);
        PyObject *columns = PyTuple_GET_ITEM(row, 1);
        if (!PyTuple_Check(pk) || !PyTuple_Check(columns)) {
            st = A_FALLBACK;
            goto done;
        }
        for (Py_ssize_t i = 0; i < width; i++) {
            held[i] = NULL;
        }
        for (Py_ssize_t c = 0; c < PyTuple_GET_SIZE(columns); c++) { /* newest version first per name */
            PyObject *column = PyTuple_GET_ITEM(columns, c);
            if (!PyTuple_Check(column) || PyTuple_GET_SIZE(column) < 2) {
                st = A_FALLBACK;
                goto done;
            }
            PyObject *position = PyDict_GetItemWithError(cells, PyTuple_GET_ITEM(column, 0));
            if (position == NULL) {
                if (PyErr_Occurred()) {
                    PyErr_Clear();
                    st = A_FALLBACK;
                    goto done;
                }
                continue;
            }
            Py_ssize_t i = PyLong_AsSsize_t(position);
            if (i < 0 || i >= width || source[i] != 1) {
                if (PyErr_Occurred()) {
                    PyErr_Clear();
                }
                st = A_FALLBACK;
                goto done;
            }
            PyObject *value = PyTuple_GET_ITEM(column, 1);
            if (held[i] == NULL && value != Py_None) { /* RowsToArrow: the first non-null version */
                held[i] = value;
            }
        }
        for (Py_ssize_t i = 0; i < width; i++) {
            if (source[i] == 0) {
                if (key_index[i] < 0 || key_index[i] >= PyTuple_GET_SIZE(pk)) {
                    st = A_FALLBACK;
                    goto done;
                }
                PyObject *item = PyTuple_GET_ITEM(pk, key_index[i]);
                if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 2 || PyTuple_GET_ITEM(item, 1) == Py_None) {
                    st = A_FALLBACK;
                    goto done;
                }
                st = flat_value(&cols[i], kind[i], PyTuple_GET_ITEM(item, 1));
            } else if (source[i] == 1) {
                st = flat_value(&cols[i], kind[i], held[i] != NULL ? held[i] : Py_None);
            } else {
                continue;
            }
            if (st != A_OK) {
                goto done;
            }
        }
    }
    out = PyList_New(width);
    if (out == NULL) {
        st = A_ERROR;
        goto done;
    }
    for (Py_ssize_t i = 0; i < width; i++) {
        PyObject *item = source[i] == 2 ? Py_NewRef(Py_None) : acol_finish(&cols[i]);
        if (item == NULL) {
            Py_CLEAR(out);
            st = A_ERROR;
            goto done;
        }
        PyList_SET_ITEM(out, i, item);
    }
done:
    if (st == A_FALLBACK) {
        out = Py_NewRef(Py_None);
    }
    if (cols != NULL) {
        for (Py_ssize_t i = 0; i < width; i++) {
            acol_free(&cols[i]);
        }
    }
    PyMem_Free(source);
    PyMem_Free(kind);
    PyMem_Free(key_index);
    PyMem_Free(held);
    PyMem_Free(cols);
    Py_XDECREF(seq);
    return st == A_ERROR ? NULL : out;
}

static PyMethodDef methods[] = {
    {"change_log_arrays", py_change_log_arrays, METH_VARARGS,
     "change_log_arrays(records, action_names, op_names): the change log's Arrow leaf buffers (changes.py), "
     "or None when the records hold values only the Python path handles."},
    {"flat_arrays", py_flat_arrays, METH_VARARGS,
     "flat_arrays(rows, specs, cells): the key and cell columns of arrow.py's RowsToArrow as Arrow buffers, "
     "or None when a value does not have its column's exact type."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    "_arrow_speedups",
    "Arrow buffers filled in C from decoded records (optional; the builders of changes.py and arrow.py are the "
    "pure-Python equivalent).",
    -1,
    methods,
    NULL,
    NULL,
    NULL,
    NULL,
};

PyMODINIT_FUNC PyInit__arrow_speedups(void) {
    return PyModule_Create(&module_def);
}
