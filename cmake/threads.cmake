# Thread ranks (src/threads, docs/threads.md): per flavour the launcher mcoll-threads
# (the runtime, linked with the host MPI) and the stand-in library that takes the host
# library's soname inside each rank's namespace (no link with the host MPI).
function(mcoll_add_threads flavour)
  set(out ${CMAKE_BINARY_DIR}/${flavour})
  set(mpi ${MCOLL_MPI_TARGET_${flavour}})
  # Its test programs (plain MPI programs, also run as processes).
  foreach(prog mcoll-test-p2p:tests/mpi/test_p2p mcoll-test-rank-state:tests/mpi/test_rank_state
               mcoll-pingpong:tools/threads/pingpong mcoll-collbench:tools/threads/collbench
               mcoll-hierbench:tools/threads/hierbench
               mcoll-test-groups:tests/mpi/test_groups
               mcoll-test-thread-coll:tests/mpi/test_thread_coll)
    string(REPLACE ":" ";" parts ${prog})
    list(GET parts 0 name)
    list(GET parts 1 src)
    add_executable(${name}_${flavour} ${CMAKE_SOURCE_DIR}/${src}.c)
    target_link_libraries(${name}_${flavour} PRIVATE ${mpi})
    set_target_properties(${name}_${flavour} PROPERTIES OUTPUT_NAME ${name}
      RUNTIME_OUTPUT_DIRECTORY ${out}/bin)
  endforeach()
  add_library(mcoll-test-lib-globals-lib_${flavour} SHARED ${CMAKE_SOURCE_DIR}/tests/mpi/lib_globals.c)
  set_target_properties(mcoll-test-lib-globals-lib_${flavour} PROPERTIES
    OUTPUT_NAME mcoll-test-globals LIBRARY_OUTPUT_DIRECTORY ${out}/lib/tests)
  add_executable(mcoll-test-lib-globals_${flavour} ${CMAKE_SOURCE_DIR}/tests/mpi/test_lib_globals.c)
  target_link_libraries(mcoll-test-lib-globals_${flavour} PRIVATE ${mpi}
                        mcoll-test-lib-globals-lib_${flavour})
  set_target_properties(mcoll-test-lib-globals_${flavour} PROPERTIES
    OUTPUT_NAME mcoll-test-lib-globals RUNTIME_OUTPUT_DIRECTORY ${out}/bin)

  set(kind ${MCOLL_MPI_KIND_${flavour}})
  set(dir ${CMAKE_SOURCE_DIR}/src/threads)
  set(standin_sources ${dir}/standin.c ${out}/threads/stubs.c)
  set(runtime_sources "")
  if(kind STREQUAL "mpich")
    set(libname mpich)
    set(soname libmpich.so.12)
    set(fortran_soname libmpichfort.so.12)
  else()
    # Open MPI: handles are addresses of the library's data objects, which the
    # stand-in defines and translates (standin_openmpi.h); its Fortran libraries
    # (mpif.h, use mpi, use mpi_f08) call the stand-in too.
    set(libname mpi)
    set(soname libmpi.so.40)
    set(fortran_soname "libmpi_mpifh.so.40 libmpi_usempif08.so.40 libmpi_usempi_ignore_tkr.so.40")
    add_custom_command(OUTPUT ${out}/threads/objects.c ${out}/threads/object_names.c
      COMMAND ${CMAKE_COMMAND} -DLIST=${dir}/openmpi_objects.txt -DSTANDIN=${out}/threads/objects.c
              -DNAMES=${out}/threads/object_names.c -P ${dir}/gen_objects.cmake
      DEPENDS ${dir}/openmpi_objects.txt ${dir}/gen_objects.cmake)
    list(APPEND standin_sources ${dir}/standin_openmpi.c ${dir}/standin_openmpi_fortran.c
         ${out}/threads/objects.c)
    list(APPEND runtime_sources ${dir}/handles_openmpi.c ${out}/threads/object_names.c)
  endif()
  # The real library, by its path: mcoll-threads loads it before the runtime.
  foreach(item ${MPI_${flavour}_LINK_LIBRARIES})
    if(item MATCHES "/lib${libname}\\.so$")
      get_filename_component(library ${item} REALPATH)
    endif()
  endforeach()
  add_custom_command(OUTPUT ${out}/threads/stubs.c
    COMMAND ${CMAKE_COMMAND} -DLIST=${dir}/${kind}_functions.txt -DOUT=${out}/threads/stubs.c
            -P ${dir}/gen_stubs.cmake
    DEPENDS ${dir}/${kind}_functions.txt ${dir}/gen_stubs.cmake)
  add_library(mcoll-threads-standin_${flavour} SHARED ${standin_sources})
  target_include_directories(mcoll-threads-standin_${flavour} PRIVATE
    $<TARGET_PROPERTY:${mpi},INTERFACE_INCLUDE_DIRECTORIES>)
  target_link_options(mcoll-threads-standin_${flavour} PRIVATE -Wl,-soname,${soname})
  set_target_properties(mcoll-threads-standin_${flavour} PROPERTIES PREFIX "" OUTPUT_NAME ${soname}
    SUFFIX "" NO_SONAME ON C_VISIBILITY_PRESET hidden LIBRARY_OUTPUT_DIRECTORY ${out}/lib/threads)

  add_library(mcoll-threads-runtime_${flavour} SHARED ${dir}/launcher.c ${dir}/api.c ${dir}/runtime.c
              ${dir}/fatal.c ${dir}/node_copy.c
              ${dir}/waits.c ${dir}/rings.c
              ${dir}/coll.c ${dir}/coll_local.c ${dir}/coll_eager.c ${dir}/eager_slots.c
              ${dir}/coll_hier.c ${dir}/elf.c ${dir}/coll_nbc.c ${dir}/groups.c ${runtime_sources}
              ${CMAKE_SOURCE_DIR}/src/coll/reduce/red_ops.c ${CMAKE_SOURCE_DIR}/src/shm/cma.c)
  # (red_ops.c: the process ranks' folds, so that both give the same bits; cma.c: the
  # single copy between processes)
  target_include_directories(mcoll-threads-runtime_${flavour} PRIVATE ${CMAKE_SOURCE_DIR}/src)
  target_link_libraries(mcoll-threads-runtime_${flavour} PRIVATE ${mpi} ${CMAKE_DL_LIBS}
                        Threads::Threads)
  target_compile_definitions(mcoll-threads-runtime_${flavour} PRIVATE
    MCOLL_THREADS_MPI_SONAMES="${soname} ${fortran_soname}")
  set_target_properties(mcoll-threads-runtime_${flavour} PROPERTIES OUTPUT_NAME mcoll-threads
    C_VISIBILITY_PRESET hidden LIBRARY_OUTPUT_DIRECTORY ${out}/lib)

  add_executable(mcoll-threads_${flavour} ${dir}/start.c)
  target_link_libraries(mcoll-threads_${flavour} PRIVATE ${CMAKE_DL_LIBS})
  target_compile_definitions(mcoll-threads_${flavour} PRIVATE
    MCOLL_THREADS_MPI_LIBRARY="${library}")
  set_target_properties(mcoll-threads_${flavour} PROPERTIES OUTPUT_NAME mcoll-threads
    RUNTIME_OUTPUT_DIRECTORY ${out}/bin)
  add_dependencies(mcoll-threads_${flavour} mcoll-threads-standin_${flavour}
                   mcoll-threads-runtime_${flavour})

  # Installed beside the flavour's libmcoll (<libdir>/mcoll/<flavour>, where the installed
  # mcollrun looks for bin/mcoll-threads), in the layout the build has and mcoll-threads
  # expects from its own folder: ../lib/libmcoll-threads.so, ../lib/threads/ (the
  # stand-in). No install RPATH: mcoll-threads loads the host library by its path, and
  # the namespaces must not be pointed at the real one. OPTIONAL: a build of chosen
  # targets (libmcoll and its tools alone) still installs what it built.
  set(libdir ${CMAKE_INSTALL_LIBDIR}/mcoll/${flavour})
  install(TARGETS mcoll-threads_${flavour} RUNTIME DESTINATION ${libdir}/bin OPTIONAL)
  install(TARGETS mcoll-threads-runtime_${flavour} LIBRARY DESTINATION ${libdir}/lib OPTIONAL)
  install(TARGETS mcoll-threads-standin_${flavour} LIBRARY DESTINATION ${libdir}/lib/threads
          OPTIONAL)
endfunction()
