// A km::Team whose collectives are a Python object's methods: kmeans_gpu/_ranks.py's Team, over
// an mpi4py communicator, for KMeans.fit(X_local, comm=...). The engines run the CLI's parted
// fit (registry.hpp: run_parted) with it, as the CLI's ranks do with MPI (dist/mpi_team.cpp),
// so every rank gets the single process's bits; the module itself links no MPI.
//
// The engines run with the GIL released; each collective takes it for the call. A Python
// exception from a collective (the Team says so on every rank when any rank failed) is kept
// and a TeamStopped thrown in its place, which unwinds the engines; once the GIL is back,
// raise_pending() raises the Python exception itself. After one, no collective runs again.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <exception>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "dist/team.hpp"

namespace kmeans_python {

namespace py = pybind11;

// Thrown through the engines in place of a collective's Python exception (PyTeam::pending).
struct TeamStopped : std::exception {
  const char* what() const noexcept override { return "a collective over the ranks failed"; }
};

class PyTeam final : public km::Team {
 public:
  // Made and destroyed with the GIL held.
  explicit PyTeam(py::object team) : team_(std::move(team)) {
    rank_ = team_.attr("rank").cast<int>();
    size_ = team_.attr("size").cast<int>();
    library_ = team_.attr("library").cast<std::string>();
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void sum(std::int64_t* v, std::size_t n) override { in_place("sum", v, n); }
  void min(std::uint64_t* v, std::size_t n) override { in_place("min", v, n); }
  void max(double* v, std::size_t n) override { in_place("max", v, n); }

  void all_gather(const void* mine, std::size_t bytes, std::vector<unsigned char>& all,
                  std::vector<std::size_t>& counts) override {
    collective([&] {
      const py::tuple got = team_.attr("all_gather")(view(static_cast<const unsigned char*>(mine), bytes));
      copy_out(got[0], all);
      counts = got[1].cast<std::vector<std::size_t>>();
    });
  }

  void gather_to_root(const void* mine, std::size_t bytes, std::vector<unsigned char>& all) override {
    collective([&] {
      copy_out(team_.attr("gather_to_root")(view(static_cast<const unsigned char*>(mine), bytes)), all);
    });
  }

  void abort(int code) override {
    py::gil_scoped_acquire gil;
    team_.attr("abort")(code);
  }

  const char* library() const override { return library_.c_str(); }

  // With the GIL held, after the engines returned or threw: the Python exception a collective
  // raised, raised again (nothing when none did).
  void raise_pending() {
    if (!pending_) return;
    py::error_already_set e = std::move(*pending_);
    pending_.reset();
    throw e;
  }

 private:
  template <class F>
  void collective(F&& f) {
    py::gil_scoped_acquire gil;
    if (pending_) throw TeamStopped();  // one collective failed: none after it
    try {
      f();
    } catch (py::error_already_set& e) {
      pending_.emplace(std::move(e));
      throw TeamStopped();
    }
  }

  // A NumPy array over v's n elements, without a copy (valid during the call only).
  template <class V>
  static py::array_t<V> view(const V* v, std::size_t n) {
    return py::array_t<V>({static_cast<py::ssize_t>(n)}, {static_cast<py::ssize_t>(sizeof(V))}, v, py::none());
  }

  template <class V>
  void in_place(const char* method, V* v, std::size_t n) {
    collective([&] { team_.attr(method)(view(v, n)); });
  }

  static void copy_out(const py::handle& bytes, std::vector<unsigned char>& out) {
    const auto a = py::array_t<unsigned char, py::array::c_style | py::array::forcecast>::ensure(bytes);
    if (!a) throw py::type_error("internal: a collective returned no bytes");
    out.assign(a.data(), a.data() + a.size());
  }

  py::object team_;
  int rank_ = 0, size_ = 1;
  std::string library_;
  std::optional<py::error_already_set> pending_;
};

// fn() with the GIL released, over `team`: a collective's Python exception is raised as itself.
template <class F>
auto over_team(PyTeam& team, F&& fn) {
  try {
    py::gil_scoped_release release;
    return fn();
  } catch (...) {
    team.raise_pending();
    throw;
  }
}

}  // namespace kmeans_python
