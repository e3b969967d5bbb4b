// sluice::Error as Python exceptions, with the message intact (a bad spec names its field):
//   kInvalidArgument -> sluice.InvalidArgumentError, a subclass of sluice.Error and ValueError
//   kNotFound        -> sluice.NotFoundError, a subclass of sluice.Error and FileNotFoundError
//   any other code   -> sluice.Error, a subclass of RuntimeError
// so `except ValueError` and `except FileNotFoundError` work as Python programs expect, and
// `except sluice.Error` catches everything sluice raises. Each exception carries `code` (the
// ErrorCode's name: "corrupt data", ...), `path` (the input it concerns, or "") and `cause` (the
// message without the path). A path that is not UTF-8 arrives as os.fsdecode would give it. Messages name stages by
// their JSON names and the host as device="cpu" (python_speaking), as a Python user writes them.
#include <cerrno>
#include <regex>
#include <string>

#include "python_module.hpp"
#include "sluice/core/error.hpp"

namespace sluice::python {

namespace {

// Owned by the module for the interpreter's life (set once at import, never freed).
PyObject* error_type = nullptr;
PyObject* invalid_argument_type = nullptr;
PyObject* not_found_type = nullptr;

PyObject* new_exception(py::module_& m, const char* name, PyObject* bases, const char* doc) {
  const std::string qualified = std::string("sluice.") + name;
  PyObject* type = PyErr_NewExceptionWithDoc(qualified.c_str(), doc, bases, nullptr);
  if (type == nullptr) throw py::error_already_set();
  m.add_object(name, py::reinterpret_borrow<py::object>(type));
  return type;
}

// Text from sluice as a str: UTF-8, with any byte that is not part of a UTF-8 sequence (a file
// name on Linux is any bytes) kept as os.fsdecode keeps it (surrogateescape), so os.fsencode
// gives the bytes back; py::str would raise UnicodeDecodeError instead.
py::str fs_str(const std::string& text) {
  PyObject* s = PyUnicode_DecodeUTF8(text.data(), static_cast<Py_ssize_t>(text.size()), "surrogateescape");
  if (s == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::str>(s);
}

// The library's messages name stages and devices as the C++ builder spells them; a Python user
// writes the JSON stage names and device="cpu". "batch(n)" -> {"batch": {"size": n}},
// "decode_jpeg()" -> "decode_jpeg", "sluice::host()" -> device="cpu".
std::string python_speaking(std::string message) {
  static const std::regex host(R"(sluice::host\(\))");
  static const std::regex batch_drop(R"(\bbatch\(([0-9]+|n), drop_last\))");
  static const std::regex batch(R"(\bbatch\(([0-9]+|n)\))");
  static const std::regex call = [] {
    std::string names;  // every stage's name, from the stages themselves
    for (const spec::Stage& stage : every_stage()) names += (names.empty() ? "" : "|") + std::string(spec::name_of(stage));
    return std::regex("\\b(" + names + ")\\(\\)");
  }();
  message = std::regex_replace(message, host, "device=\"cpu\"");
  message = std::regex_replace(message, batch_drop, "{\"batch\": {\"size\": $1, \"drop_last\": true}}");
  message = std::regex_replace(message, batch, "{\"batch\": {\"size\": $1}}");
  return std::regex_replace(message, call, "\"$1\"");
}

void raise(const Error& e) {
  PyObject* type = error_type;
  if (e.code() == ErrorCode::kInvalidArgument) type = invalid_argument_type;
  if (e.code() == ErrorCode::kNotFound) type = not_found_type;
  const std::string what = python_speaking(e.what());
  const std::string cause = python_speaking(e.cause());
  // Built as an object first so the attributes can be set before it is raised.
  py::object exception = py::reinterpret_borrow<py::object>(type)(fs_str(what));
  exception.attr("code") = py::str(std::string(to_string(e.code())));
  exception.attr("path") = fs_str(e.path());
  exception.attr("cause") = fs_str(cause);
  if (e.code() == ErrorCode::kNotFound && !e.path().empty()) {
    // OSError's fields, as Python fills them for a missing file: its str() then reads
    // "[Errno 2] <cause>: '<path>'" (with filename alone it read "[Errno None] None: '<path>'";
    // sluice.Error comes first in the bases, so OSError's constructor never parses them).
    exception.attr("errno") = ENOENT;
    exception.attr("strerror") = fs_str(cause.empty() ? what : cause);
    exception.attr("filename") = fs_str(e.path());
  }
  PyErr_SetObject(type, exception.ptr());
}

}  // namespace

void register_errors(py::module_& m) {
  py::object runtime_error = py::reinterpret_borrow<py::object>(PyExc_RuntimeError);
  error_type = new_exception(m, "Error", runtime_error.ptr(),
                             "An error from sluice; `code`, `path` and `cause` say which and why.");
  py::tuple invalid_bases = py::make_tuple(py::reinterpret_borrow<py::object>(error_type),
                                           py::reinterpret_borrow<py::object>(PyExc_ValueError));
  invalid_argument_type =
      new_exception(m, "InvalidArgumentError", invalid_bases.ptr(),
                    "A bad spec or configuration (sluice.Error and ValueError); the message names the field.");
  py::tuple not_found_bases = py::make_tuple(py::reinterpret_borrow<py::object>(error_type),
                                             py::reinterpret_borrow<py::object>(PyExc_FileNotFoundError));
  not_found_type = new_exception(m, "NotFoundError", not_found_bases.ptr(),
                                 "A missing spec file, data set or file (sluice.Error and FileNotFoundError).");

  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const Error& e) {
      raise(e);
    }
  });
}

}  // namespace sluice::python
