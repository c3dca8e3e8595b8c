# An MPI described by its C compiler wrapper (mpicc): Open MPI's answers --showme:*,
# MPICH's (and MPICH-derived ones') -compile_info / -link_info. Defines the interface
# target mcoll_mpi_<flavour> with the wrapper's flags, and for mcollrun the flavour's
# kind (openmpi or mpich launcher options), mpiexec and library folder.
function(mcoll_mpi_from_wrapper wrapper name out_flavour)
  execute_process(COMMAND ${wrapper} --showme:compile OUTPUT_VARIABLE compile
                  RESULT_VARIABLE rc ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(rc EQUAL 0)
    set(kind openmpi)
    execute_process(COMMAND ${wrapper} --showme:link OUTPUT_VARIABLE link
                    OUTPUT_STRIP_TRAILING_WHITESPACE COMMAND_ERROR_IS_FATAL ANY)
  else()
    set(kind mpich)
    # Both start with the underlying compiler's name.
    execute_process(COMMAND ${wrapper} -compile_info OUTPUT_VARIABLE compile
                    OUTPUT_STRIP_TRAILING_WHITESPACE COMMAND_ERROR_IS_FATAL ANY)
    execute_process(COMMAND ${wrapper} -link_info OUTPUT_VARIABLE link
                    OUTPUT_STRIP_TRAILING_WHITESPACE COMMAND_ERROR_IS_FATAL ANY)
  endif()
  separate_arguments(compile UNIX_COMMAND "${compile}")
  separate_arguments(link UNIX_COMMAND "${link}")
  if(kind STREQUAL "mpich")
    list(REMOVE_AT compile 0)
    list(REMOVE_AT link 0)
    list(REMOVE_ITEM compile -c)
  endif()

  # The major version from its mpi.h, for the default name.
  set(major "")
  foreach(flag ${compile})
    if(flag MATCHES "^-I(.+)")
      set(header "${CMAKE_MATCH_1}/mpi.h")
    endif()
    if(flag MATCHES "^-I" AND EXISTS "${header}")
      file(STRINGS "${header}" lines REGEX "#define (OMPI_MAJOR_VERSION|MPICH_VERSION) ")
      foreach(line ${lines})
        # (one test per if: CMake evaluates both sides of an OR, resetting CMAKE_MATCH_1)
        if(line MATCHES "OMPI_MAJOR_VERSION ([0-9]+)")
          set(major ${CMAKE_MATCH_1})
        endif()
        if(line MATCHES "MPICH_VERSION \"([0-9]+)")
          set(major ${CMAKE_MATCH_1})
        endif()
      endforeach()
    endif()
  endforeach()
  if(NOT name)
    set(name ${kind}${major})
  endif()
  set(libdir "")
  foreach(flag ${link})
    if(flag MATCHES "^-L(.+)" AND NOT libdir)
      set(libdir ${CMAKE_MATCH_1})
    endif()
  endforeach()
  get_filename_component(bindir ${wrapper} DIRECTORY)
  # Beside a wrapper with a suffix (Debian's mpicc.mpich), the mpiexec with the same
  # suffix: the bare name is an alternative that may be the other MPI's.
  get_filename_component(wrapper_name ${wrapper} NAME)
  set(mpiexec ${bindir}/mpiexec)
  if(wrapper_name MATCHES "^mpicc(\\..+)$" AND EXISTS ${bindir}/mpiexec${CMAKE_MATCH_1})
    set(mpiexec ${bindir}/mpiexec${CMAKE_MATCH_1})
  endif()

  add_library(mcoll_mpi_${name} INTERFACE IMPORTED GLOBAL)
  target_compile_options(mcoll_mpi_${name} INTERFACE ${compile})
  target_link_libraries(mcoll_mpi_${name} INTERFACE ${link}) # (after the objects)
  message(STATUS "mcoll: MPI from ${wrapper}: flavour ${name} (${kind} ${major}), libraries in ${libdir}")
  set(${out_flavour} ${name} PARENT_SCOPE)
  set(MCOLL_MPI_TARGET_${name} mcoll_mpi_${name} PARENT_SCOPE)
  set(MCOLL_MPI_KIND_${name} ${kind} PARENT_SCOPE)
  set(MCOLL_MPI_MPIEXEC_${name} ${mpiexec} PARENT_SCOPE)
  set(MCOLL_MPI_LIBDIR_${name} ${libdir} PARENT_SCOPE)
endfunction()
