/* The tokenizers of ClickHouse's text indexes (see tokenizer.h): the Python entry point. */
#include "tokenizer.h"

/* The spans found so far, as a list of (start, end) tuples. */
typedef struct {
    const u8 *base;
    PyObject *spans; /* NULL once appending failed (the exception is set) */
} span_list;

static void span_list_add(void *context, const u8 *token, size_t length) {
    span_list *list = context;
    if (!list->spans)
        return;
    Py_ssize_t start = (Py_ssize_t)(token - list->base);
    PyObject *span = Py_BuildValue("(nn)", start, start + (Py_ssize_t)length);
    if (!span || PyList_Append(list->spans, span) < 0)
        Py_CLEAR(list->spans);
    Py_XDECREF(span);
}

/* tokenize(data, tokenizer, n) -> [(start, end), ...]: the tokens of one string, exactly as
 * text_granules adds them (n: the n-gram size, or the packed sparse-gram parameters; ignored
 * for TOKENIZER_TOKEN). */
PyObject *py_tokenize(PyObject *self, PyObject *args) {
    Py_buffer data;
    int tokenizer;
    Py_ssize_t n;
    if (!PyArg_ParseTuple(args, "y*in", &data, &tokenizer, &n))
        return NULL;
    span_list list = {.base = (const u8 *)data.buf, .spans = NULL};
    if (tokenizer != TOKENIZER_NGRAM && tokenizer != TOKENIZER_TOKEN &&
        tokenizer != TOKENIZER_SPARSE_GRAMS)
        PyErr_SetString(PyExc_ValueError, "tokenizer must be 0 (ngram), 1 (token) or 2 (sparse grams)");
    else if (tokenizer == TOKENIZER_NGRAM && n < 1)
        PyErr_SetString(PyExc_ValueError, "n must be at least 1");
    else if (tokenizer == TOKENIZER_SPARSE_GRAMS && (n < 0 || !sparse_params_valid((size_t)n)))
        PyErr_SetString(PyExc_ValueError, "n: invalid packed sparse-gram parameters");
    else if ((list.spans = PyList_New(0)) != NULL) {
        size_t parameter = (size_t)n;
        if (tokenizer == TOKENIZER_SPARSE_GRAMS)
            parameter = sparse_params_for_cpu(parameter);
        for_each_token(list.base, (size_t)data.len, tokenizer, parameter, span_list_add, &list);
    }
    PyBuffer_Release(&data);
    return list.spans;
}
